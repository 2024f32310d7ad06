//! The jobrelay gRPC contract (`jobrelay.v1`) and the conventions both sides
//! of the wire agree on: label and annotation keys, the manager name, and how
//! Jobs and statuses are encoded inside messages.
//!
//! This crate has no Kubernetes client and performs no I/O.

/// Generated messages and the `Relay` client and server.
pub mod v1 {
    #![allow(missing_docs, clippy::all)]
    tonic::include_proto!("jobrelay.v1");
}

pub mod duration;
pub mod holding;
pub mod instance;
pub mod kinds;
pub mod rejection;
pub mod skew;
pub mod wire;

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::v1::{
        AgentMessage, ApplyMirror, Hello, InventoryEntry, ManagerMessage, MirrorPhase,
        agent_message, manager_message,
    };

    #[test]
    fn the_session_is_served_as_jobrelay_v1_relay() {
        assert_eq!(super::v1::relay_server::SERVICE_NAME, "jobrelay.v1.Relay");
    }

    #[test]
    fn messages_survive_the_wire() {
        let hello = AgentMessage {
            kind: Some(agent_message::Kind::Hello(Hello {
                cluster: "worker-a".into(),
                agent_version: "0.1.0".into(),
                inventory: vec![InventoryEntry {
                    origin_uid: "7d0c".into(),
                    revision: 3,
                    phase: MirrorPhase::Running as i32,
                    kind: Some(crate::kinds::JOB.to_wire()),
                    namespace: "ml".into(),
                }],
                manager_instances: vec!["3f2a".into()],
                adopted_manager_instance: String::new(),
                kinds: vec![crate::kinds::JOB.to_wire(), crate::kinds::JOBSET.to_wire()],
            })),
        };
        assert_eq!(
            AgentMessage::decode(hello.encode_to_vec().as_slice()).unwrap(),
            hello
        );

        let apply = ManagerMessage {
            kind: Some(manager_message::Kind::ApplyMirror(ApplyMirror {
                origin_uid: "7d0c".into(),
                revision: 4,
                object: br#"{"apiVersion":"batch/v1","kind":"Job"}"#.to_vec(),
                kind: Some(crate::kinds::JOB.to_wire()),
            })),
        };
        assert_eq!(
            ManagerMessage::decode(apply.encode_to_vec().as_slice()).unwrap(),
            apply
        );
    }
}
