//! The orphan decision and the brakes as one sweep applies them.

use super::*;

/// A mirror that can start no Pod (fenced, suspended, finished), or a Pod
/// (no name).
fn held(uid: &str, namespace: &str, name: &str) -> HeldMirror {
    HeldMirror {
        origin_uid: uid.into(),
        namespace: namespace.into(),
        name: name.into(),
        stopped: !name.is_empty(),
    }
}

fn uids(orphans: &[HeldMirror]) -> Vec<&str> {
    orphans.iter().map(|m| m.origin_uid.as_str()).collect()
}

#[test]
fn nothing_is_an_orphan_when_the_manager_wants_everything_held() {
    let desired: OriginUids = ["u1", "u2"].map(String::from).into_iter().collect();
    let found = orphans(
        [
            held("u1", "ml", "a"),
            held("u2", "ml", "b"),
            held("u2", "ml", ""),
        ],
        &desired,
        |_| false,
    );
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn what_is_not_desired_and_not_yet_deleting_is_an_orphan_once_in_uid_order() {
    let desired: OriginUids = ["u1"].map(String::from).into_iter().collect();
    let found = orphans(
        [
            held("u4", "ml", "d"),
            held("u1", "ml", "a"),
            held("u3", "ml", "c"),
            held("u3", "ml", "c"),
            held("u2", "ml", "b"),
            held("u5", "batch", ""),
        ],
        &desired,
        |uid| uid == "u2",
    );
    assert_eq!(uids(&found), ["u3", "u4", "u5"]);
    assert_eq!(found[0], held("u3", "ml", "c"));
    assert_eq!(
        found[2],
        held("u5", "batch", ""),
        "a Pod alone is an orphan"
    );
}

#[test]
fn of_a_job_and_its_pods_one_entry_is_kept() {
    let found = orphans(
        [
            held("u1", "ml", ""),
            held("u1", "ml", "train"),
            held("u1", "ml", ""),
        ],
        &OriginUids::default(),
        |_| false,
    );
    assert_eq!(
        found,
        [held("u1", "ml", "train")],
        "the Job's entry names it"
    );
}

fn sweep(after_lost: bool, released: &[&str]) -> Sweep {
    let mut sweep = Sweep::new(Brake::new(super::super::BrakeSettings {
        share: 0.5,
        at_least: 2,
        confirm: std::time::Duration::from_secs(60),
    }));
    sweep.after_lost = after_lost;
    sweep.released = released.iter().map(|u| u.to_string()).collect();
    sweep
}

/// The figures of the notice the sweep left for the manager, if any:
/// unknown, released, live.
fn notice(sweep: &mut Sweep) -> Option<(u32, u32, u32)> {
    match sweep.take_notice()?.kind {
        Some(Kind::DeletionsHeld(held)) => Some((held.unknown, held.released, held.live)),
        other => panic!("not a DeletionsHeld: {other:?}"),
    }
}

fn four_orphans() -> Vec<HeldMirror> {
    ["a", "b", "c", "d"]
        .iter()
        .map(|u| held(u, "ml", &format!("job-{u}")))
        .collect()
}

#[test]
fn the_brake_holds_unknown_orphans_beyond_the_share() {
    let mut sweep = sweep(false, &[]);
    let now = Instant::now();
    let allowed = sweep.allowed(four_orphans()[1..].to_vec(), 5, now);
    assert!(allowed.is_empty(), "three unknown of five live are held");
    assert!(
        !sweep.released_brake.holding(),
        "with nothing released, the other brake does not hold"
    );
    assert_eq!(sweep.held_gauge.get(), 3);
    assert_eq!(
        notice(&mut sweep),
        Some((3, 0, 5)),
        "the manager hears of it"
    );
    assert!(sweep.take_notice().is_none(), "once");
    let later = sweep.allowed(
        four_orphans()[1..].to_vec(),
        4,
        now + std::time::Duration::from_secs(60),
    );
    assert_eq!(uids(&later), ["b", "c", "d"], "confirmed after the wait");
    assert_eq!(sweep.held_gauge.get(), 0);
}

#[test]
fn a_small_share_is_never_held_released_or_not() {
    let mut back = sweep(true, &[]);
    assert_eq!(back.allowed(four_orphans(), 10, Instant::now()).len(), 4);
    assert!(back.take_notice().is_none());
    let mut churn = sweep(false, &[]);
    assert_eq!(
        churn.allowed(four_orphans(), 10, Instant::now()).len(),
        4,
        "four of ten is not more than half"
    );
}

#[test]
fn released_beyond_the_share_wait_for_the_confirmation_on_their_own_time() {
    for mut sweep in [sweep(true, &[]), sweep(false, &["a", "b", "c", "d"])] {
        let now = Instant::now();
        assert!(
            sweep.allowed(four_orphans(), 5, now).is_empty(),
            "four of five held"
        );
        assert_eq!(sweep.held_gauge.get(), 4);
        assert_eq!(
            notice(&mut sweep),
            Some((0, 4, 5)),
            "the manager hears of it"
        );
        let later = sweep.allowed(four_orphans(), 5, now + std::time::Duration::from_secs(60));
        assert_eq!(
            uids(&later),
            ["a", "b", "c", "d"],
            "confirmed after the wait"
        );
    }
}

#[test]
fn released_wait_while_both_kinds_together_are_beyond_the_share() {
    // Two released and two unknown of five: the unknown alone are not
    // more than half and go; all four are, so the released wait.
    let mut sweep = sweep(false, &["a", "b"]);
    let allowed = sweep.allowed(four_orphans(), 5, Instant::now());
    assert_eq!(uids(&allowed), ["c", "d"]);
    assert_eq!(sweep.held_gauge.get(), 2);
}

#[test]
fn released_mirrors_that_may_still_run_pods_go_at_once() {
    // Back from Lost with an agent that was down (nothing fenced): the four
    // mirrors may still run Pods while their Jobs run elsewhere.
    let running = |uid: &str| HeldMirror {
        stopped: false,
        ..held(uid, "ml", &format!("job-{uid}"))
    };
    let mut back = sweep(true, &[]);
    let orphans = ["a", "b", "c", "d"].map(running).to_vec();
    assert_eq!(
        uids(&back.allowed(orphans, 5, Instant::now())),
        ["a", "b", "c", "d"],
        "two copies never run"
    );
    assert!(back.take_notice().is_none());
    // Beside two stopped ones, the running go and the stopped wait: all
    // four orphans are beyond the share.
    let mut mixed = sweep(true, &[]);
    let mut orphans = four_orphans();
    orphans[0].stopped = false;
    orphans[1].stopped = false;
    let allowed = mixed.allowed(orphans, 5, Instant::now());
    assert_eq!(uids(&allowed), ["a", "b"]);
    assert_eq!(mixed.held_gauge.get(), 2);
}

#[test]
fn a_mirror_stopped_is_suspended_or_finished() {
    for phase in [
        MirrorPhase::Suspended,
        MirrorPhase::Succeeded,
        MirrorPhase::Failed,
        MirrorPhase::Deleting,
    ] {
        assert!(stopped(phase), "{phase:?}");
    }
    for phase in [
        MirrorPhase::Pending,
        MirrorPhase::Running,
        MirrorPhase::Unspecified,
    ] {
        assert!(!stopped(phase), "{phase:?}");
    }
}
