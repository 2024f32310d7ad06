//! The fleet's bookkeeping, session by session, without a cluster.

use super::*;
use crate::kinds::Key;
use crate::mirror::{Apply, Cleanup, Held, State, StatusText, rejection};
use jobrelay_proto::v1::{DeleteReason, RejectReason};
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::reflector::ObjectRef;

pub(super) fn fleet() -> (Fleet, mpsc::UnboundedReceiver<Key>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Fleet::new(tx), rx)
}

pub(super) fn key(name: &str) -> Key {
    Key::of(&ObjectRef::<Job>::new(name).within("ns"))
}

/// An outbox with room for anything a test sends.
pub(super) fn outbox() -> (Outbox, mpsc::Receiver<ManagerMessage>) {
    Outbox::new(1024)
}

pub(super) fn kinds(rx: &mut mpsc::Receiver<ManagerMessage>) -> Vec<String> {
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
        ..Default::default()
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
fn a_mirror_holds_logs_while_its_worker_holds_it_and_no_deletion_began() {
    let (fleet, _) = fleet();
    let (tx, _rx) = outbox();
    fleet.connect("w1", "test", &[], vec![], vec![], tx);
    fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new);
    assert_eq!(fleet.holding("u1"), None, "sent, not yet held");
    fleet
        .record_status("w1", "u1", Held::new(1, MirrorPhase::Succeeded, None))
        .unwrap();
    assert_eq!(fleet.holding("u1").as_deref(), Some("w1"));
    fleet.cleanup("w1", "u1", &key("a"), DeleteReason::RetentionExpired);
    assert_eq!(fleet.holding("u1"), None, "being deleted with its Pods");
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
        .record_status("w1", "u1", Held::new(1, MirrorPhase::Pending, None))
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
            Held::new(
                1,
                MirrorPhase::Running,
                Some(StatusText::new(&serde_json::json!({"active": 1}))),
            ),
        )
        .unwrap();
    fleet.record_lost("w1", "u1", "j1", "deleted").unwrap();
    let view = fleet.view("w1", "u1").unwrap();
    assert_eq!(view.state.held(), None);
    assert!(view.state.unshown_loss().is_some());
    fleet.lost_accounted("w1", "u1");
    fleet
        .record_lost("w1", "u1", "j1", "deleted again")
        .unwrap();
    assert!(
        matches!(fleet.view("w1", "u1").unwrap().state, State::Lost(ref loss) if loss.accounted),
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
    assert!(!fleet.view("w1", "u1").unwrap().state.lost_or_gone());
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
            fleet.record_status("w1", &uid, Held::new(1, MirrorPhase::Running, None)),
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
fn a_desired_set_sent_again_keeps_what_the_fleet_sends_and_releases_what_it_withdrew() {
    let (fleet, _) = fleet();
    let (tx, mut rx) = outbox();
    let session = fleet.connect("w1", "test", &[], vec![], vec![], tx);
    for (uid, name) in [("u1", "a"), ("u2", "b"), ("u3", "c"), ("u4", "d")] {
        fleet.ensure_applied("w1", uid, &key(name), 1, Vec::new);
    }
    fleet.cleanup("w1", "u4", &key("d"), DeleteReason::ManagerJobDeleted);
    let _ = kinds(&mut rx);
    let desired = vec![(
        DesiredMirror {
            origin_uid: "u1".into(),
            ..Default::default()
        },
        key("a"),
    )];
    // u2's object lags in the stores (sent, not wanted there yet): kept.
    // u3's object is gone from the stores: the agent's brake weighs it.
    // u4 is being withdrawn: released.
    let known: std::collections::HashSet<String> =
        ["u1", "u2", "u4", "elsewhere"].map(String::from).into();
    let resent = fleet
        .resync("w1", session, desired.clone(), &known)
        .expect("the session is open");
    let mut keys = resent.keys.clone();
    keys.sort_by_key(|k| k.to_string());
    assert_eq!(
        keys,
        [key("a"), key("b"), key("c"), key("d")],
        "every mirror tracked there"
    );
    assert_eq!(resent.kept, 1);
    match rx.try_recv().map(|m| m.kind) {
        Ok(Some(Kind::DesiredSet(set))) => {
            let uids: Vec<&str> = set.mirrors.iter().map(|m| m.origin_uid.as_str()).collect();
            assert_eq!(uids, ["u1", "u2"]);
            assert_eq!(set.released, ["u4"]);
            assert!(!set.after_lost);
        }
        other => panic!("a DesiredSet, not {other:?}"),
    }
    assert!(
        fleet.resync("w1", session + 1, desired, &known).is_none(),
        "another session's resync sends nothing"
    );
    assert!(kinds(&mut rx).is_empty());
}
