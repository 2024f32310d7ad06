//! The counts each cluster keeps as its mirrors change equal a recount of
//! its views, whatever the change: placement, apply, report, deletion,
//! loss, forgetting, reconnect.

use super::*;
use crate::job::placement::Wants;
use crate::mirror::{Held, Rejection};
use jobrelay_proto::v1::{DeleteReason, RejectReason};
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::reflector::ObjectRef;

/// The counts as placement and the cluster's status once made them: a
/// pass over every mirror.
fn recounted(fleet: &Fleet) -> (Vec<Candidate>, Vec<(String, u32)>) {
    let clusters = fleet.lock();
    let candidates = clusters
        .iter()
        .filter(|(_, c)| c.session.is_some())
        .map(|(name, c)| Candidate {
            name: name.clone(),
            active_mirrors: c
                .mirrors
                .values()
                .filter(|m| !matches!(m.state, crate::mirror::State::Gone { .. }))
                .count(),
        })
        .collect();
    let held = clusters
        .iter()
        .map(|(name, c)| {
            let held = c
                .mirrors
                .values()
                .filter(|m| m.state.held().is_some())
                .count();
            (name.clone(), held as u32)
        })
        .collect();
    (candidates, held)
}

fn kept(fleet: &Fleet) -> (Vec<Candidate>, Vec<(String, u32)>) {
    let names: Vec<String> = fleet.lock().keys().cloned().collect();
    let held = names
        .into_iter()
        .map(|name| {
            let held = fleet.link(&name).active_mirrors;
            (name, held)
        })
        .collect();
    (fleet.candidates(), held)
}

fn key(n: u64) -> Key {
    Key::of(&ObjectRef::<Job>::new(&format!("job-{n}")).within("ns"))
}

const CLUSTERS: [&str; 3] = ["w1", "w2", "w3"];

/// One change of any kind the fleet knows, chosen by `roll`.
fn change(
    fleet: &Fleet,
    agents: &mut Vec<mpsc::Receiver<ManagerMessage>>,
    sessions: &mut BTreeMap<&'static str, u64>,
    roll: u64,
) -> String {
    let cluster = CLUSTERS[(roll % 3) as usize];
    let n = (roll / 3) % 12;
    let uid = format!("u{n}");
    let revision = 1 + (roll / 36) % 3;
    let uid = uid.as_str();
    match (roll / 108) % 13 {
        0 | 1 => {
            let placed = fleet.place(uid, &key(n), Wants::default(), |c| {
                c != "w3" || n.is_multiple_of(2)
            });
            format!("place {uid} -> {placed:?}")
        }
        2 => {
            fleet.place(uid, &key(n), Wants::pinned(Some(cluster)), |_| true);
            format!("place {uid} pinned to {cluster}")
        }
        3 => format!(
            "apply {uid} r{revision} on {cluster}: {:?}",
            fleet.ensure_applied(cluster, uid, &key(n), revision, Vec::new)
        ),
        4 => format!(
            "status {uid} r{revision} on {cluster}: {:?}",
            fleet.record_status(
                cluster,
                uid,
                Held::new(revision, MirrorPhase::Running, None)
            )
        ),
        5 => {
            let rejection = Rejection {
                revision,
                reason: RejectReason::Conflict,
                message: "no".into(),
                retry_in: None,
                since: std::time::Instant::now(),
            };
            fleet.record_rejected(cluster, uid, rejection);
            format!("rejected {uid} on {cluster}")
        }
        6 => {
            fleet.record_lost(cluster, uid, "j", "deleted");
            fleet.lost_accounted(cluster, uid);
            format!("lost {uid} on {cluster}")
        }
        7 => format!(
            "cleanup {uid} on {cluster}: {:?}",
            fleet.cleanup(cluster, uid, &key(n), DeleteReason::ManagerJobDeleted)
        ),
        8 => format!(
            "gone {uid} on {cluster}: {:?}",
            fleet.record_gone(cluster, uid, 1).is_some()
        ),
        9 => {
            fleet.forget(cluster, uid);
            format!("forget {uid} on {cluster}")
        }
        10 => {
            if let Some(session) = sessions.remove(cluster) {
                fleet.disconnect(cluster, session);
            }
            fleet.set_lost(cluster, roll.is_multiple_of(2));
            format!("disconnect {cluster}")
        }
        _ => {
            // The agent holds some mirrors (not all of them wanted), and the
            // manager wants some (not all of them held).
            let inventory: Vec<InventoryEntry> = (0..12)
                .filter(|i| (roll >> i) & 1 == 1)
                .map(|i| InventoryEntry {
                    origin_uid: format!("u{i}"),
                    revision: 1 + i % 2,
                    phase: MirrorPhase::Running as i32,
                    kind: None,
                    namespace: String::new(),
                })
                .collect();
            let desired = (0..12)
                .filter(|i| (roll >> (i + 5)) & 1 == 1)
                .map(|i| {
                    let mirror = DesiredMirror {
                        origin_uid: format!("u{i}"),
                        ..Default::default()
                    };
                    (mirror, key(i))
                })
                .collect();
            let (tx, rx) = Outbox::new(1024);
            agents.push(rx);
            let session = fleet.connect(cluster, "test", &inventory, desired, vec![], tx);
            sessions.insert(cluster, session);
            format!("connect {cluster}")
        }
    }
}

#[test]
fn the_counts_kept_equal_a_recount_after_every_kind_of_change() {
    let (tx, _triggers) = mpsc::unbounded_channel();
    let fleet = Fleet::new(tx);
    let mut agents = Vec::new();
    let mut sessions = BTreeMap::new();
    // A fixed pseudo-random walk (xorshift): thousands of changes of every
    // kind, in orders no hand-written sequence would try.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut done = Vec::new();
    for _ in 0..5000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        done.push(change(&fleet, &mut agents, &mut sessions, state));
        assert_eq!(
            kept(&fleet),
            recounted(&fleet),
            "after {:?}",
            &done[done.len().saturating_sub(5)..]
        );
    }
    let kinds: std::collections::BTreeSet<&str> = done
        .iter()
        .filter_map(|step| step.split(' ').next())
        .collect();
    assert_eq!(kinds.len(), 10, "every kind of change was made: {kinds:?}");
    assert!(
        fleet.candidates().iter().any(|c| c.active_mirrors > 0),
        "the walk left mirrors counted"
    );
}

#[test]
fn a_mirror_counts_while_wanted_and_not_gone_and_holds_while_reported_held() {
    let (tx, _triggers) = mpsc::unbounded_channel();
    let fleet = Fleet::new(tx);
    let (outbox, _agent) = Outbox::new(1024);
    fleet.connect("w1", "test", &[], vec![], vec![], outbox);
    let counts = |fleet: &Fleet| {
        (
            fleet.candidates()[0].active_mirrors,
            fleet.link("w1").active_mirrors,
        )
    };
    assert_eq!(
        fleet
            .place("u1", &key(1), Wants::default(), |_| true)
            .cluster(),
        Some("w1")
    );
    assert_eq!(counts(&fleet), (1, 0), "placed: counted, not held");
    fleet.ensure_applied("w1", "u1", &key(1), 1, Vec::new);
    fleet.record_status("w1", "u1", Held::new(1, MirrorPhase::Running, None));
    assert_eq!(counts(&fleet), (1, 1), "held");
    fleet.cleanup("w1", "u1", &key(1), DeleteReason::ManagerJobDeleted);
    fleet.record_gone("w1", "u1", 0);
    assert_eq!(counts(&fleet), (0, 0), "gone");
    fleet.ensure_applied("w1", "u1", &key(1), 2, Vec::new);
    assert_eq!(counts(&fleet), (1, 0), "applied afresh after a suspension");
    fleet.forget("w1", "u1");
    assert_eq!(counts(&fleet), (0, 0), "forgotten");
}
