//! The Relay service in one process, without TLS: a WorkerCluster's
//! certificate pin is judged when a session opens and again whenever the
//! WorkerCluster changes, so a session whose pin stops taking it ends at
//! once. (Without TLS no certificate is presented, so any pin refuses; the
//! e2e in `tests/e2e/security/pinning.rs` pins real certificates.)

use std::time::Duration;

use jobrelay_manager::clusters::certificate_pin::CertificatePin;
use jobrelay_manager::clusters::worker_cluster::{WorkerCluster, WorkerClusterSpec};
use jobrelay_proto::v1::ManagerMessage;
use jobrelay_proto::v1::manager_message::Kind;
use tonic::{Code, Status};

#[path = "support/relay.rs"]
mod support;
use support::*;

fn w1(spec: WorkerClusterSpec) -> WorkerCluster {
    WorkerCluster::new("w1", spec)
}

fn pinned(digest: &str) -> WorkerClusterSpec {
    WorkerClusterSpec {
        certificate: Some(CertificatePin {
            public_key_sha256: vec![digest.into()],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// How the session ends, within a deadline.
async fn ended(session: &mut Session) -> Status {
    let ending = async {
        loop {
            match session.inbound.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("the stream ended without a status"),
                Err(status) => return status,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), ending)
        .await
        .expect("the session ends within 10s")
}

#[tokio::test]
async fn a_session_ends_when_its_clusters_pin_changes_to_refuse_it_and_not_on_other_changes() {
    let manager = manager().await;
    let mut session = connect(&manager, hello("w1", vec![]))
        .await
        .expect("admitted while nothing is pinned");
    session.next().await; // Welcome
    session.next().await; // DesiredSet

    // The fencing changes: the session stays, and the agent is welcomed
    // again with its new fenceAfter.
    manager.update_cluster(w1(WorkerClusterSpec {
        lost_after: Some("5m".into()),
        ..Default::default()
    }));
    let again = tokio::time::timeout(Duration::from_secs(5), session.inbound.message()).await;
    let Ok(Ok(Some(ManagerMessage {
        kind: Some(Kind::Welcome(welcome)),
    }))) = again
    else {
        panic!("welcomed again: {again:?}");
    };
    assert_eq!(
        welcome.fence_after,
        Some(prost_types::Duration {
            seconds: 260,
            nanos: 0
        }),
        "5m less 2/15 of it"
    );

    // Another field changes: nothing arrives, the session stays.
    manager.update_cluster(w1(WorkerClusterSpec {
        lost_after: Some("5m".into()),
        namespace_selector: Some(Default::default()),
        ..Default::default()
    }));
    let stayed = tokio::time::timeout(Duration::from_millis(300), session.inbound.message()).await;
    assert!(stayed.is_err(), "nothing arrives: {stayed:?}");
    assert!(manager.fleet.is_connected("w1"));

    // Pinned: the session ends, saying why.
    manager.update_cluster(w1(pinned(&"ab".repeat(32))));
    let status = ended(&mut session).await;
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(
        status.message().starts_with(
            "session ended: WorkerCluster w1 pins its agent's certificate (spec.certificate)"
        ),
        "{}",
        status.message()
    );
    assert!(
        manager.counted("jobrelay_sessions_cut_total{reason=\"certificate_pin_mismatch\"} 1"),
        "{}",
        manager.metrics.render()
    );

    // And a new session is refused the same way.
    let refused = connect(&manager, hello("w1", vec![]))
        .await
        .err()
        .expect("refused while the pin does not take it");
    assert_eq!(refused.code(), Code::PermissionDenied);
    assert!(
        manager.counted("jobrelay_sessions_refused_total{reason=\"certificate_pin_mismatch\"} 1")
    );
}

#[tokio::test]
async fn an_invalid_pin_refuses_every_session_naming_the_cluster_and_field() {
    let manager = manager().await;
    manager.update_cluster(w1(pinned("sha256:not-a-digest")));
    let refused = connect(&manager, hello("w1", vec![]))
        .await
        .err()
        .expect("refused while the pin is invalid");
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert!(
        refused
            .message()
            .starts_with("WorkerCluster w1: spec.certificate.publicKeySHA256[0]"),
        "{}",
        refused.message()
    );
    assert!(
        manager.counted("jobrelay_sessions_refused_total{reason=\"certificate_pin_invalid\"} 1")
    );
    assert!(!manager.fleet.is_connected("w1"));
}
