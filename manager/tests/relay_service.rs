//! The `jobrelay.v1.Relay` service in one process, over `tokio::io::duplex`
//! (no ports, no cluster): a session says Hello and is welcomed with the
//! DesiredSet, applies and deletes reach the agent, status and gone reach the
//! fleet, a reconnect replays state instead of messages, and an unknown or
//! malformed peer is refused with the right status code.

use jobrelay_manager::mirror::{Apply, Cleanup};
use jobrelay_proto::v1::relay_client::RelayClient;
use jobrelay_proto::v1::{
    DeleteReason, InventoryEntry, MirrorGone, MirrorPhase, MirrorStatus, agent_message,
    manager_message,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

#[path = "support/relay.rs"]
mod support;
use support::*;

#[tokio::test]
async fn a_session_is_welcomed_with_the_desired_set_and_carries_applies_status_and_gone() {
    let mut manager = manager().await;
    let mut session = connect(&manager, hello("w1", vec![]))
        .await
        .expect("admitted");
    let manager_message::Kind::Welcome(welcome) = session.next().await else {
        panic!("Welcome first");
    };
    assert_eq!(welcome.origin, ORIGIN);
    assert_eq!(welcome.manager_instance, INSTANCE);
    assert_eq!(
        welcome.heartbeat_interval,
        prost_types::Duration::try_from(HEARTBEAT).ok()
    );
    let manager_message::Kind::DesiredSet(desired) = session.next().await else {
        panic!("then the DesiredSet");
    };
    let uids: Vec<&str> = desired
        .mirrors
        .iter()
        .map(|m| m.origin_uid.as_str())
        .collect();
    assert_eq!(uids, [UID], "the held Job is desired on its cluster");
    eventually("the fleet to know w1 connected", || {
        manager.fleet.is_connected("w1")
    })
    .await;

    assert_eq!(
        manager
            .fleet
            .ensure_applied("w1", UID, &key(), 1, || b"{}".to_vec()),
        Apply::Sent
    );
    let manager_message::Kind::ApplyMirror(apply) = session.next().await else {
        panic!("the apply");
    };
    assert_eq!(
        (
            apply.origin_uid.as_str(),
            apply.revision,
            apply.object.as_slice(),
            apply.kind.as_ref().map(ToString::to_string).as_deref()
        ),
        (UID, 1, &b"{}"[..], Some("Job.batch/v1"))
    );

    while manager.triggers.try_recv().is_ok() {}
    session.say(agent_message::Kind::MirrorStatus(MirrorStatus {
        origin_uid: UID.into(),
        revision: 1,
        phase: MirrorPhase::Running as i32,
        status: br#"{"active": 1}"#.to_vec(),
        unschedulable: None,
        pods: None,
    }));
    eventually("the status in the fleet", || {
        manager
            .fleet
            .view("w1", UID)
            .and_then(|v| v.state.status().cloned())
            .and_then(|s| s.read::<k8s_openapi::api::batch::v1::JobStatus>())
            .and_then(|s| s.active)
            == Some(1)
    })
    .await;
    assert_eq!(
        manager.triggers.recv().await,
        Some(key()),
        "the Job is reconciled"
    );

    // A report about a mirror never placed here costs the manager nothing.
    session.say(agent_message::Kind::MirrorStatus(MirrorStatus {
        origin_uid: "never-placed".into(),
        revision: 1,
        phase: MirrorPhase::Running as i32,
        status: b"{}".to_vec(),
        unschedulable: None,
        pods: None,
    }));
    eventually("the stray report dropped and counted", || {
        manager
            .metrics
            .render()
            .contains("jobrelay_reports_dropped_total{cluster=\"w1\"} 1")
    })
    .await;
    assert!(manager.fleet.view("w1", "never-placed").is_none());

    assert_eq!(
        manager
            .fleet
            .cleanup("w1", UID, &key(), DeleteReason::ManagerJobDeleted),
        Cleanup::Started { first: true }
    );
    let manager_message::Kind::DeleteMirror(delete) = session.next().await else {
        panic!("the delete");
    };
    assert_eq!(
        (delete.namespace.as_str(), delete.name.as_str()),
        ("ml", "train")
    );
    session.say(agent_message::Kind::MirrorGone(MirrorGone {
        origin_uid: UID.into(),
        pods_deleted: 2,
    }));
    eventually("the gone in the fleet", || {
        manager
            .fleet
            .cleanup("w1", UID, &key(), DeleteReason::ManagerJobDeleted)
            == Cleanup::Gone { pods_deleted: 2 }
    })
    .await;
}

#[tokio::test]
async fn a_reconnect_replays_state_not_messages() {
    let manager = manager().await;
    let mut first = connect(&manager, hello("w1", vec![]))
        .await
        .expect("admitted");
    first.next().await;
    first.next().await;
    eventually("w1 connected", || manager.fleet.is_connected("w1")).await;
    assert_eq!(
        manager.fleet.ensure_applied("w1", UID, &key(), 1, Vec::new),
        Apply::Sent
    );
    drop(first);
    eventually("the first session ended", || {
        !manager.fleet.is_connected("w1")
    })
    .await;

    // The agent kept the mirror: its inventory says so, and nothing is resent.
    let held = InventoryEntry {
        origin_uid: UID.into(),
        revision: 1,
        phase: MirrorPhase::Running as i32,
        kind: None,
        namespace: String::new(),
    };
    let mut second = connect(&manager, hello("w1", vec![held]))
        .await
        .expect("admitted again");
    assert!(matches!(
        second.next().await,
        manager_message::Kind::Welcome(_)
    ));
    assert!(matches!(
        second.next().await,
        manager_message::Kind::DesiredSet(_)
    ));
    eventually("w1 connected again", || manager.fleet.is_connected("w1")).await;
    assert_eq!(
        manager.fleet.ensure_applied("w1", UID, &key(), 1, Vec::new),
        Apply::InPlace
    );

    // A newer revision is sent over the new session.
    assert_eq!(
        manager.fleet.ensure_applied("w1", UID, &key(), 2, Vec::new),
        Apply::Sent
    );
    let manager_message::Kind::ApplyMirror(apply) = second.next().await else {
        panic!("the apply of revision 2");
    };
    assert_eq!(apply.revision, 2);
}

#[tokio::test]
async fn an_unknown_cluster_or_a_session_not_opened_by_hello_is_refused() {
    let manager = manager().await;
    let Err(refused) = connect(&manager, hello("ghost", vec![])).await else {
        panic!("a session for an unknown cluster was admitted");
    };
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    assert!(
        refused.message().contains("no WorkerCluster named ghost"),
        "{}",
        refused.message()
    );
    assert!(
        manager.counted("jobrelay_sessions_refused_total{reason=\"unknown_cluster\"} 1"),
        "{}",
        manager.metrics.render()
    );

    let (send, outbound) = mpsc::unbounded_channel();
    send.send(message(agent_message::Kind::MirrorGone(
        MirrorGone::default(),
    )))
    .unwrap();
    let refused = RelayClient::new(manager.channel.clone())
        .connect(UnboundedReceiverStream::new(outbound))
        .await
        .expect_err("a session not opened by Hello is refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(!manager.fleet.is_connected("ghost"));
}

#[tokio::test]
async fn an_agent_of_an_unsupported_version_is_refused_saying_which_versions_are_taken() {
    let manager = manager().await;
    let mut newer = hello("w1", vec![]);
    newer.agent_version = "99.0.0".into();
    let Err(refused) = connect(&manager, newer).await else {
        panic!("an agent newer than the manager was admitted");
    };
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains("upgrade the manager first"),
        "{}",
        refused.message()
    );
    assert!(!manager.fleet.is_connected("w1"));
    assert!(
        manager.counted("jobrelay_sessions_refused_total{reason=\"version_skew\"} 1"),
        "{}",
        manager.metrics.render()
    );
}

#[tokio::test]
async fn a_worker_holding_another_instances_mirrors_is_refused_until_its_agent_adopts_this_one() {
    let manager = manager().await;
    let mut elsewhere = hello("w1", vec![]);
    elsewhere.manager_instances = vec![INSTANCE.into(), "restored-from".into()];
    let Err(refused) = connect(&manager, elsewhere.clone()).await else {
        panic!("a manager commanded mirrors another instance made");
    };
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains("instance restored-from")
            && refused
                .message()
                .contains("--adopt-manager-instance=hub-instance"),
        "{}",
        refused.message()
    );
    assert!(!manager.fleet.is_connected("w1"));
    assert!(
        manager.counted("jobrelay_sessions_refused_total{reason=\"manager_instance_refused\"} 1"),
        "{}",
        manager.metrics.render()
    );

    elsewhere.adopted_manager_instance = INSTANCE.into();
    connect(&manager, elsewhere)
        .await
        .expect("admitted once the agent adopted this instance");
}
