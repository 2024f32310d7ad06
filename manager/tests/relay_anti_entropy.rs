//! Anti-entropy over the `jobrelay.v1.Relay` service in one process: an
//! agent whose Heartbeats say it holds another desired set than the manager
//! wants on its cluster, twice in a row with nothing in flight, is sent the
//! DesiredSet again, and the resync is counted; one in step, or one with
//! messages still in flight, is sent nothing.

use jobrelay_manager::mirror::Apply;
use jobrelay_proto::holding::Summary;
use jobrelay_proto::v1::{Heartbeat, agent_message, manager_message};

#[path = "support/relay.rs"]
mod support;
use support::*;

fn beat(received: u64, uids: &[&str]) -> agent_message::Kind {
    let holding = Summary::of(uids.iter().copied()).holding(received);
    agent_message::Kind::Heartbeat(Heartbeat {
        holding: Some(holding),
    })
}

#[tokio::test]
async fn a_desired_set_that_stays_apart_is_sent_again_once_and_counted() {
    let manager = manager().await;
    let mut session = connect(&manager, hello("w1", vec![]))
        .await
        .expect("admitted");
    let manager_message::Kind::Welcome(_) = session.next().await else {
        panic!("Welcome first");
    };
    let manager_message::Kind::DesiredSet(_) = session.next().await else {
        panic!("then the DesiredSet");
    };
    eventually("the fleet to know w1 connected", || {
        manager.fleet.is_connected("w1")
    })
    .await;

    // In step, and apart while an apply is in flight: nothing is sent.
    session.say(beat(1, &[UID]));
    session.say(beat(1, &[UID]));
    assert_eq!(
        manager
            .fleet
            .ensure_applied("w1", UID, &key(), 1, || b"{}".to_vec()),
        Apply::Sent
    );
    let manager_message::Kind::ApplyMirror(_) = session.next().await else {
        panic!("the apply");
    };
    session.say(beat(1, &[UID, "forgotten"]));
    session.say(beat(1, &[UID, "forgotten"]));
    // The apply taken: apart twice in a row, with the same summaries.
    session.say(beat(2, &[UID, "forgotten"]));
    session.say(beat(2, &[UID, "forgotten"]));
    let manager_message::Kind::DesiredSet(again) = session.next().await else {
        panic!("the DesiredSet again");
    };
    let uids: Vec<&str> = again
        .mirrors
        .iter()
        .map(|m| m.origin_uid.as_str())
        .collect();
    assert_eq!(uids, [UID], "what the manager wants on w1");
    assert!(again.released.is_empty() && !again.after_lost);
    assert!(manager.counted("jobrelay_desired_set_resyncs_total{cluster=\"w1\"} 1\n"));

    // Still apart right after: within the spacing, nothing more is sent.
    session.say(beat(3, &[UID, "forgotten"]));
    session.say(beat(3, &[UID, "forgotten"]));
    assert_eq!(
        manager
            .fleet
            .ensure_applied("w1", UID, &key(), 2, || b"{}".to_vec()),
        Apply::Sent
    );
    let manager_message::Kind::ApplyMirror(apply) = session.next().await else {
        panic!("the next apply, not another DesiredSet");
    };
    assert_eq!(apply.revision, 2);
    assert!(manager.counted("jobrelay_desired_set_resyncs_total{cluster=\"w1\"} 1\n"));
}
