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

pub mod wire;
