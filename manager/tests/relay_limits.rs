//! What one session may hold, on the service in one process: an agent that
//! says no Hello is refused at the deadline, one that reads too slowly is
//! cut off and told to resync, one that sends a message beyond its kind's
//! limit is cut off; each is counted.

use std::time::Duration;

use jobrelay_manager::mirror::Apply;
use jobrelay_manager::session::SessionLimits;
use jobrelay_proto::v1::relay_client::RelayClient;
use jobrelay_proto::v1::{AgentMessage, MirrorPhase, MirrorStatus, agent_message, manager_message};
use tonic::Code;

#[path = "support/relay.rs"]
mod support;
use support::*;

/// Reads the agent's side until the stream ends; the status it ended with.
async fn end_of(session: &mut Session) -> tonic::Status {
    // Bounded: far more than the transport can hold of what a test sends.
    for _ in 0..10_000 {
        let read = tokio::time::timeout(Duration::from_secs(10), session.inbound.message())
            .await
            .expect("the stream moves within 10s");
        match read {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stream ended without a status"),
            Err(status) => return status,
        }
    }
    panic!("the stream never ended")
}

#[tokio::test]
async fn a_peer_that_says_no_hello_is_refused_at_the_deadline() {
    let manager = manager_with(SessionLimits {
        hello_timeout: Duration::from_millis(200),
        ..Default::default()
    })
    .await;
    let refused = RelayClient::new(manager.channel.clone())
        .connect(futures::stream::pending::<AgentMessage>())
        .await
        .expect_err("no session without a Hello");
    assert_eq!(refused.code(), Code::DeadlineExceeded, "{refused:?}");
    assert!(manager.counted("jobrelay_sessions_refused_total{reason=\"hello_timeout\"} 1"));
}

#[tokio::test]
async fn an_agent_that_reads_too_slowly_is_cut_off_and_told_to_resync() {
    let manager = manager_with(SessionLimits {
        outbox_capacity: 4,
        ..Default::default()
    })
    .await;
    let mut session = connect(&manager, hello("w1", vec![]))
        .await
        .expect("admitted");
    eventually("w1 connected", || manager.fleet.is_connected("w1")).await;
    // The agent reads nothing: applies of a large Job fill the transport's
    // buffers, then the outbox.
    let job = vec![b'x'; 256 * 1024];
    let mut revision = 1;
    while manager.fleet.is_connected("w1") && revision < 1000 {
        let sent = manager
            .fleet
            .ensure_applied("w1", UID, &key(), revision, || job.clone());
        assert!(
            matches!(sent, Apply::Sent | Apply::Disconnected),
            "{sent:?}"
        );
        revision += 1;
        tokio::task::yield_now().await;
    }
    eventually("the session cut", || !manager.fleet.is_connected("w1")).await;
    let status = end_of(&mut session).await;
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("resync"), "{}", status.message());
    assert!(manager.counted("jobrelay_sessions_cut_total{reason=\"outbox_full\"} 1"));
}

#[tokio::test]
async fn a_message_beyond_its_kinds_limit_ends_the_session() {
    let manager = manager().await;
    let mut session = connect(&manager, hello("w1", vec![]))
        .await
        .expect("admitted");
    assert!(matches!(
        session.next().await,
        manager_message::Kind::Welcome(_)
    ));
    assert!(matches!(
        session.next().await,
        manager_message::Kind::DesiredSet(_)
    ));
    session.say(agent_message::Kind::MirrorStatus(MirrorStatus {
        origin_uid: UID.into(),
        revision: 1,
        phase: MirrorPhase::Running as i32,
        status: vec![b' '; 300 * 1024],
        unschedulable: None,
        pods: None,
    }));
    let status = end_of(&mut session).await;
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("MirrorStatus"),
        "{}",
        status.message()
    );
    assert!(manager.counted("jobrelay_sessions_cut_total{reason=\"message_too_large\"} 1"));
    assert!(
        manager
            .fleet
            .view("w1", UID)
            .and_then(|v| v.state.status().cloned())
            .is_none(),
        "nothing of it was kept"
    );
}
