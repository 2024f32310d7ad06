//! The fleet's bookkeeping, session by session, without a cluster.

use super::*;
use crate::fleet::views::{Apply, Cleanup, Rejection};
use crate::job::status::StatusText;
use jobrelay_proto::v1::{DeleteReason, RejectReason};

fn fleet() -> (Fleet, mpsc::UnboundedReceiver<ObjectRef<Job>>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Fleet::new(tx), rx)
}

fn key(name: &str) -> ObjectRef<Job> {
    ObjectRef::new(name).within("ns")
}

/// An outbox with room for anything a test sends.
fn outbox() -> (Outbox, mpsc::Receiver<ManagerMessage>) {
    Outbox::new(1024)
}

fn kinds(rx: &mut mpsc::Receiver<ManagerMessage>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(m) = rx.try_recv() {
        out.push(match m.kind.unwrap() {
            Kind::DesiredSet(d) => format!("desired {}", d.mirrors.len()),
            Kind::ApplyMirror(a) => format!("apply {} r{}", a.origin_uid, a.revision),
            Kind::DeleteMirror(d) => format!("delete {}", d.origin_uid),
            other => format!("{other:?}"),
        });
    }
    out
}

#[test]
fn the_desired_set_goes_first_and_applies_are_sent_once_per_session_and_revision() {
    let (fleet, _) = fleet();
    let (tx, mut rx) = outbox();
    fleet.connect("w1", "test", &[], vec![], vec![], tx);
    assert_eq!(
        fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
        Apply::Sent
    );
    assert_eq!(
        fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
        Apply::InPlace
    );
    assert_eq!(
        fleet.ensure_applied("w1", "u1", &key("a"), 2, Vec::new),
        Apply::Sent
    );
    assert_eq!(kinds(&mut rx), ["desired 0", "apply u1 r1", "apply u1 r2"]);

    // A reconnect whose inventory lacks the mirror sends it again.
    let (tx, mut rx) = outbox();
    fleet.connect("w1", "test", &[], vec![], vec![], tx);
    assert_eq!(
        fleet.ensure_applied("w1", "u1", &key("a"), 2, Vec::new),
        Apply::Sent
    );
    assert_eq!(kinds(&mut rx), ["desired 0", "apply u1 r2"]);
}

#[test]
fn apply_needed_says_when_a_send_is_due_and_sends_nothing() {
    let (fleet, _) = fleet();
    assert_eq!(
        fleet.apply_needed("w1", "u1", &key("a"), 1),
        Some(Apply::Disconnected)
    );
    let (tx, mut rx) = outbox();
    fleet.connect("w1", "test", &[], vec![], vec![], tx);
    assert_eq!(fleet.apply_needed("w1", "u1", &key("a"), 1), None);
    assert_eq!(fleet.apply_needed("w1", "u1", &key("a"), 1), None);
    assert_eq!(kinds(&mut rx), ["desired 0"]);
    fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new);
    assert_eq!(
        fleet.apply_needed("w1", "u1", &key("a"), 1),
        Some(Apply::InPlace)
    );
    assert_eq!(fleet.apply_needed("w1", "u1", &key("a"), 2), None);
    assert_eq!(kinds(&mut rx), ["apply u1 r1"]);
}

#[test]
fn a_mirror_in_the_inventory_is_not_sent_again() {
    let (fleet, _) = fleet();
    let (tx, mut rx) = outbox();
    let held = InventoryEntry {
        origin_uid: "u1".into(),
        revision: 3,
        ..Default::default()
    };
    let desired = DesiredMirror {
        origin_uid: "u1".into(),
    };
    fleet.connect("w1", "test", &[held], vec![(desired, key("a"))], vec![], tx);
    assert_eq!(
        fleet.ensure_applied("w1", "u1", &key("a"), 3, Vec::new),
        Apply::InPlace
    );
    assert_eq!(kinds(&mut rx), ["desired 1"]);
}

#[test]
fn cleanup_waits_for_gone_and_resends_the_delete_in_a_new_session() {
    let (fleet, _) = fleet();
    assert_eq!(
        fleet.cleanup("w1", "u1", &key("a"), DeleteReason::ManagerJobDeleted),
        Cleanup::Disconnected
    );
    let (tx, mut rx) = outbox();
    let s1 = fleet.connect("w1", "test", &[], vec![], vec![], tx);
    assert_eq!(
        fleet.cleanup("w1", "u1", &key("a"), DeleteReason::ManagerJobDeleted),
        Cleanup::Started { first: true }
    );
    assert_eq!(
        fleet.cleanup("w1", "u1", &key("a"), DeleteReason::ManagerJobDeleted),
        Cleanup::Waiting
    );
    fleet.disconnect("w1", s1);
    let (tx, mut rx2) = outbox();
    fleet.connect("w1", "test", &[], vec![], vec![], tx);
    assert_eq!(
        fleet.cleanup("w1", "u1", &key("a"), DeleteReason::ManagerJobDeleted),
        Cleanup::Started { first: false }
    );
    fleet.record_gone("w1", "u1", 2);
    assert_eq!(
        fleet.cleanup("w1", "u1", &key("a"), DeleteReason::ManagerJobDeleted),
        Cleanup::Gone { pods_deleted: 2 }
    );
    assert_eq!(kinds(&mut rx), ["desired 0", "delete u1"]);
    assert_eq!(kinds(&mut rx2), ["desired 0", "delete u1"]);
}

#[test]
fn a_resumed_job_is_applied_only_after_its_old_mirror_is_gone() {
    let (fleet, _) = fleet();
    let (tx, mut rx) = outbox();
    fleet.connect("w1", "test", &[], vec![], vec![], tx);
    fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new);
    fleet.cleanup("w1", "u1", &key("a"), DeleteReason::ManagerJobDeleted);
    assert_eq!(
        fleet.ensure_applied("w1", "u1", &key("a"), 3, Vec::new),
        Apply::AwaitingGone
    );
    fleet.record_gone("w1", "u1", 0);
    assert_eq!(
        fleet.ensure_applied("w1", "u1", &key("a"), 3, Vec::new),
        Apply::Sent
    );
    assert_eq!(
        kinds(&mut rx),
        ["desired 0", "apply u1 r1", "delete u1", "apply u1 r3"]
    );
}

#[test]
fn a_rejected_revision_is_not_resent_and_least_loaded_counts_live_mirrors() {
    let (fleet, mut triggers) = fleet();
    let (tx, _rx) = outbox();
    fleet.connect("w1", "test", &[], vec![], vec![], tx);
    let (tx2, _rx2) = outbox();
    fleet.connect("w2", "test", &[], vec![], vec![], tx2);
    fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new);
    let conflict = rejection(RejectReason::Conflict);
    fleet.record_rejected("w1", "u1", conflict.clone()).unwrap();
    assert_eq!(triggers.try_recv().unwrap(), key("a"));
    assert_eq!(
        fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
        Apply::Rejected(conflict)
    );
    let counts: Vec<(String, usize)> = fleet
        .candidates()
        .into_iter()
        .map(|c| (c.name, c.active_mirrors))
        .collect();
    assert_eq!(counts, [("w1".to_string(), 1), ("w2".to_string(), 0)]);
}

/// A refusal of revision 1, for tests.
pub(crate) fn rejection(reason: RejectReason) -> Rejection {
    Rejection {
        revision: 1,
        reason,
        message: "no".into(),
        retry_in: None,
    }
}

#[test]
fn a_refusal_that_can_clear_waits_until_the_worker_holds_the_mirror() {
    let (fleet, _) = fleet();
    let (tx, mut rx) = outbox();
    fleet.connect("w1", "test", &[], vec![], vec![], tx);
    fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new);
    let quota = rejection(RejectReason::QuotaExceeded);
    fleet.record_rejected("w1", "u1", quota.clone()).unwrap();
    assert_eq!(
        fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
        Apply::Waiting(quota)
    );
    fleet
        .record_status("w1", "u1", 1, MirrorPhase::Pending, None)
        .unwrap();
    assert_eq!(
        fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
        Apply::InPlace,
        "once held, the refusal is history"
    );
    assert_eq!(
        kinds(&mut rx),
        ["desired 0", "apply u1 r1"],
        "never resent by the manager"
    );
}

#[test]
fn a_lost_mirror_is_applied_again_only_once_its_remains_are_gone() {
    let (fleet, _) = fleet();
    let (tx, mut rx) = outbox();
    fleet.connect("w1", "test", &[], vec![], vec![], tx);
    fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new);
    fleet
        .record_status(
            "w1",
            "u1",
            1,
            MirrorPhase::Running,
            Some(StatusText::new(&serde_json::json!({"active": 1}))),
        )
        .unwrap();
    fleet.record_lost("w1", "u1", "j1", "deleted").unwrap();
    let view = fleet.view("w1", "u1").unwrap();
    assert_eq!(view.held_revision, None);
    assert!(!view.lost.as_ref().unwrap().accounted);
    fleet.lost_accounted("w1", "u1");
    fleet
        .record_lost("w1", "u1", "j1", "deleted again")
        .unwrap();
    assert!(
        fleet.view("w1", "u1").unwrap().lost.unwrap().accounted,
        "a repeated report of the same loss is the same loss"
    );
    assert_eq!(
        fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
        Apply::AwaitingGone,
        "never two generations live at once"
    );
    fleet.record_gone("w1", "u1", 2).unwrap();
    assert_eq!(
        fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
        Apply::Sent
    );
    assert!(fleet.view("w1", "u1").unwrap().lost.is_none());
    assert_eq!(kinds(&mut rx), ["desired 0", "apply u1 r1", "apply u1 r1"]);
}

#[test]
fn reports_about_mirrors_never_placed_on_the_cluster_are_dropped() {
    let (fleet, mut triggers) = fleet();
    let (tx, _rx) = outbox();
    let stray = InventoryEntry {
        origin_uid: "elsewhere".into(),
        revision: 1,
        ..Default::default()
    };
    fleet.connect("w1", "test", &[stray], vec![], vec![], tx);
    for n in 0..1000 {
        let uid = format!("u{n}");
        assert_eq!(
            fleet.record_status("w1", &uid, 1, MirrorPhase::Running, None),
            None
        );
        assert_eq!(fleet.record_lost("w1", &uid, "j", "gone"), None);
    }
    assert!(fleet.view("w1", "u1").is_none() && fleet.view("w1", "elsewhere").is_none());
    assert!(triggers.try_recv().is_err(), "no reconcile asked for");
    assert_eq!(
        fleet.record_gone("w9", "u1", 0),
        None,
        "nor for an unknown cluster"
    );
}

#[test]
fn jobs_placed_together_spread_and_a_placement_is_stable() {
    let (fleet, _) = fleet();
    assert_eq!(
        fleet.place("u0", &key("z"), None, |_| true),
        None,
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
                .place(&format!("u{i}"), &key("a"), None, |_| true)
                .unwrap()
        })
        .collect();
    assert_eq!(placed, ["w1", "w2", "w1", "w2"]);
    assert_eq!(
        fleet.place("u1", &key("a"), None, |_| true).as_deref(),
        Some("w2")
    );
    assert_eq!(
        fleet
            .place("u9", &key("b"), Some("w7"), |_| true)
            .as_deref(),
        Some("w7")
    );
    assert_eq!(
        fleet
            .place("u5", &key("c"), None, |name| name == "w1")
            .as_deref(),
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
        fleet.place("u1", &key("a"), None, |_| true).as_deref(),
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
    fleet.place("u1", &key("a"), None, |_| true);
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
