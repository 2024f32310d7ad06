//! Placement and ownership: Jobs placed together spread and stay where
//! they are; a cluster owns only what is placed on it; a Lost cluster's
//! mirrors are released and said so when it returns.

use super::tests::{fleet, key, kinds, outbox};
use super::*;
use crate::job::placement::Choice;
use crate::job::placement::Wants;
use crate::kinds::Key;

#[test]
fn jobs_placed_together_spread_and_a_placement_is_stable() {
    let (fleet, _) = fleet();
    assert_eq!(
        fleet.place("u0", &key("z"), Wants::default(), |_| true),
        Choice::NoCluster,
        "no cluster connected"
    );
    let mut outboxes = Vec::new();
    for cluster in ["w1", "w2"] {
        let (tx, rx) = outbox();
        outboxes.push(rx);
        fleet.connect(cluster, "test", &[], vec![], vec![], tx);
    }
    let placed: Vec<String> = (0..4)
        .map(|i| {
            fleet
                .place(&format!("u{i}"), &key("a"), Wants::default(), |_| true)
                .cluster()
                .expect("placed")
                .to_string()
        })
        .collect();
    assert_eq!(placed, ["w1", "w2", "w1", "w2"]);
    assert_eq!(
        fleet
            .place("u1", &key("a"), Wants::default(), |_| true)
            .cluster(),
        Some("w2")
    );
    assert_eq!(
        fleet
            .place("u9", &key("b"), Wants::pinned(Some("w7")), |_| true)
            .cluster(),
        Some("w7")
    );
    assert_eq!(
        fleet
            .place("u5", &key("c"), Wants::default(), |name| name == "w1")
            .cluster(),
        Some("w1"),
        "only eligible clusters are candidates"
    );
}

#[test]
fn only_a_disconnected_cluster_can_be_lost_and_a_session_ends_it() {
    let (fleet, _) = fleet();
    let (tx, _rx) = outbox();
    let session = fleet.connect("w1", "0.1.0", &[], vec![], vec![], tx);
    assert!(
        !fleet.set_lost("w1", true),
        "a connected cluster is not lost"
    );
    fleet.disconnect("w1", session);
    let link = fleet.link("w1");
    assert!(!link.connected && link.since.is_some() && link.agent_version == "0.1.0");
    assert!(fleet.set_lost("w1", true));
    assert!(fleet.is_lost("w1"));
    let (tx, _rx) = outbox();
    fleet.connect("w1", "0.1.0", &[], vec![], vec![], tx);
    assert!(!fleet.is_lost("w1"));
}

#[test]
fn a_cluster_owns_only_the_mirrors_placed_on_it() {
    let (fleet, _) = fleet();
    let (tx, _rx) = outbox();
    fleet.connect("w1", "test", &[], vec![], vec![], tx);
    assert!(!fleet.owns("w1", "u1"), "nothing placed yet");
    assert_eq!(
        fleet
            .place("u1", &key("a"), Wants::default(), |_| true)
            .cluster(),
        Some("w1")
    );
    assert!(fleet.owns("w1", "u1"));
    assert!(
        !fleet.owns("w2", "u1"),
        "another cluster's report is not read"
    );
    fleet.forget("w1", "u1");
    assert!(!fleet.owns("w1", "u1"), "a forgotten mirror is not read");
}

#[tokio::test]
async fn a_session_whose_outbox_is_full_is_told_and_drops_the_message() {
    let (fleet, _) = fleet();
    let (tx, mut rx) = Outbox::new(1);
    fleet.connect("w1", "test", &[], vec![], vec![], tx.clone());
    fleet.place("u1", &key("a"), Wants::default(), |_| true);
    fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new);
    assert_eq!(kinds(&mut rx), ["desired 0"], "the apply found no room");
    let told = tokio::time::timeout(std::time::Duration::from_secs(5), tx.fell_behind()).await;
    assert!(told.is_ok(), "the session learns it fell behind");
}

#[test]
fn the_desired_set_after_a_lost_spell_says_so_and_carries_what_is_released() {
    let (fleet, _triggers) = fleet();
    let desired_set = |rx: &mut mpsc::Receiver<ManagerMessage>| match rx.try_recv().unwrap().kind {
        Some(Kind::DesiredSet(set)) => set,
        other => panic!("not a DesiredSet: {other:?}"),
    };
    let (tx, mut rx) = outbox();
    let first = fleet.connect("w1", "test", &[], vec![], vec!["gone".into()], tx);
    let set = desired_set(&mut rx);
    assert_eq!(
        (set.released, set.after_lost),
        (vec!["gone".to_string()], false)
    );
    fleet.disconnect("w1", first);
    assert!(fleet.set_lost("w1", true));
    let (tx, mut rx) = outbox();
    let back = fleet.connect("w1", "test", &[], vec![], vec![], tx);
    assert!(desired_set(&mut rx).after_lost, "back from Lost");
    assert!(!fleet.is_lost("w1"));
    fleet.disconnect("w1", back);
    let (tx, mut rx) = outbox();
    fleet.connect("w1", "test", &[], vec![], vec![], tx);
    assert!(!desired_set(&mut rx).after_lost, "an ordinary reconnect");
}

#[test]
fn a_jobset_goes_only_where_the_agent_mirrors_jobsets_and_a_job_anywhere() {
    use jobrelay_proto::kinds::{JOB, JOBSET};
    let (fleet, _) = fleet();
    let mut outboxes = Vec::new();
    for cluster in ["w1", "w2"] {
        let (tx, rx) = outbox();
        outboxes.push(rx);
        fleet.connect(cluster, "test", &[], vec![], vec![], tx);
    }
    // w1's agent names no kind (older than kinds): Jobs only.
    fleet.set_kinds("w2", &[JOB.to_wire(), JOBSET.to_wire()]);
    let jobset = Key {
        kind: JOBSET,
        ..key("train")
    };
    for i in 0..3 {
        assert_eq!(
            fleet
                .place(&format!("s{i}"), &jobset, Wants::default(), |_| true)
                .cluster(),
            Some("w2"),
            "JobSet {i}"
        );
    }
    assert_eq!(
        fleet
            .place("j0", &key("a"), Wants::default(), |_| true)
            .cluster(),
        Some("w1"),
        "a Job goes to the emptier cluster, whatever it mirrors besides"
    );
    fleet.set_kinds("w2", &[JOB.to_wire()]);
    assert_eq!(
        fleet.place("s9", &jobset, Wants::default(), |_| true),
        Choice::NoCluster
    );
}
