//! When a mirror whose Pods wait for a node moves, as one table.

use std::time::{Duration, Instant};

use jobrelay_proto::v1::MirrorPhase;

use super::*;
use crate::kinds::Key;
use crate::mirror::{Held, State};

fn key() -> Key {
    Key::of(
        &kube::runtime::reflector::ObjectRef::<k8s_openapi::api::batch::v1::Job>::new("j")
            .within("ns"),
    )
}

const TIMEOUT: Duration = Duration::from_secs(120);

fn now() -> Instant {
    static NOW: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    // Far enough from the clock's origin to subtract any wait below.
    *NOW.get_or_init(|| Instant::now() + Duration::from_secs(3600))
}

fn stuck(pods: u32, waited: u64) -> Unschedulable {
    Unschedulable {
        pods,
        since: now() - Duration::from_secs(waited),
        message: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector"
            .into(),
    }
}

fn counts(active: u32, ready: u32, ended: u32) -> Option<PodCounts> {
    Some(PodCounts {
        active,
        ready,
        ended,
    })
}

fn rules(movable: bool, even_after_a_pod_ran: bool) -> MoveRules {
    MoveRules {
        movable,
        even_after_a_pod_ran,
        timeout: TIMEOUT,
    }
}

/// What a row expects: stays, looked at again after so many seconds, moves.
#[derive(Debug, PartialEq)]
enum Then {
    Stays,
    Again(u64),
    Moves,
}

#[rustfmt::skip]
#[test]
fn a_mirror_moves_once_every_pod_waited_for_its_timeout_and_none_ran() {
    use Then::*;
    let cases = [
        ("nothing waits", None, counts(1, 0, 0), rules(true, false), Stays),
        ("its Pods wait, not yet for the timeout", Some(stuck(1, 30)), counts(1, 0, 0), rules(true, false), Again(90)),
        ("its Pods waited for the timeout", Some(stuck(1, 120)), counts(1, 0, 0), rules(true, false), Moves),
        ("its Pods waited past the timeout", Some(stuck(2, 600)), counts(2, 0, 0), rules(true, false), Moves),
        ("the status lags: more wait than it counts", Some(stuck(2, 600)), counts(1, 0, 0), rules(true, false), Moves),
        ("one Pod of two was bound", Some(stuck(1, 600)), counts(2, 0, 0), rules(true, false), Stays),
        ("a Pod runs", Some(stuck(1, 600)), counts(2, 1, 0), rules(true, false), Stays),
        ("a Pod ran and ended", Some(stuck(1, 600)), counts(1, 0, 1), rules(true, false), Stays),
        ("a Pod ran and ended, the Job says always", Some(stuck(1, 600)), counts(1, 0, 1), rules(true, true), Moves),
        ("a Pod runs, the Job says always", Some(stuck(1, 600)), counts(2, 1, 0), rules(true, true), Stays),
        ("not movable (pinned, suspended, or Kueue on the manager decides)", Some(stuck(1, 600)), counts(1, 0, 0), rules(false, true), Stays),
        ("a kind whose status counts no Pods", Some(stuck(1, 600)), None, rules(true, true), Stays),
    ];
    for (what, waiting, counts, rules, then) in cases {
        let mirror = Mirror {
            key: key(),
            state: State::Held(Held {
                revision: 1,
                phase: MirrorPhase::Pending,
                status: None,
                unschedulable: waiting,
                pods: None,
            }),
        };
        let apply = Step::Apply { cluster: "w1".into() };
        let (step, again) = moved_when_unschedulable(apply.clone(), Some(&mirror), counts, &rules, None, now());
        let got = match (&step, again) {
            (Step::Withdraw { cluster, why: Some(why) }, None) if cluster == "w1" && why.unschedulable => Moves,
            (Step::Apply { .. }, Some(left)) => Again(left.as_secs()),
            (Step::Apply { .. }, None) => Stays,
            other => panic!("{what}: {other:?}"),
        };
        assert_eq!(got, then, "{what}");
    }
}

#[test]
fn the_reason_says_which_cluster_for_how_long_and_what_the_scheduler_says() {
    let why = match waiting(
        "w1",
        Some(&stuck(1, 150)),
        counts(1, 0, 0),
        &rules(true, false),
        now(),
    ) {
        Waiting::TooLong(why) => why,
        other => panic!("{other:?}"),
    };
    for part in [
        "1 Pods found no node on cluster w1 for 150s",
        "unschedulableTimeout is 120s",
        "none of them ever ran",
        "didn't match Pod's node affinity/selector",
        "cluster w1 tried last",
    ] {
        assert!(why.contains(part), "{part:?} in {why:?}");
    }
}

#[test]
fn only_a_job_applied_on_its_cluster_moves() {
    let mirror = Mirror {
        key: key(),
        state: State::Held(Held {
            revision: 1,
            phase: MirrorPhase::Pending,
            status: None,
            unschedulable: Some(stuck(1, 600)),
            pods: None,
        }),
    };
    for step in [
        Step::Hold {
            cluster: "w1".into(),
        },
        Step::Release,
        Step::AwaitChange,
    ] {
        let moved = moved_when_unschedulable(
            step.clone(),
            Some(&mirror),
            counts(1, 0, 0),
            &rules(true, false),
            None,
            now(),
        );
        assert_eq!(moved, (step, None));
    }
}

#[test]
fn a_move_once_begun_goes_on_when_the_mirror_no_longer_says_its_pods_wait() {
    let gone = Mirror {
        key: key(),
        state: State::Gone {
            pods_deleted: 1,
            loss: None,
        },
    };
    let apply = || Step::Apply {
        cluster: "w1".into(),
    };
    let under_way = Withdrawal {
        why: "1 Pods found no node on cluster w1".into(),
        unschedulable: true,
        ..Withdrawal::default()
    };
    let rules = rules(true, false);
    let moved = moved_when_unschedulable(
        apply(),
        Some(&gone),
        None,
        &rules,
        Some(under_way.clone()),
        now(),
    );
    let withdraw = Step::Withdraw {
        cluster: "w1".into(),
        why: Some(under_way),
    };
    assert_eq!(moved, (withdraw, None));
    let other = Withdrawal {
        why: "Kueue evicted the Workload".into(),
        ..Withdrawal::default()
    };
    assert_eq!(
        moved_when_unschedulable(apply(), Some(&gone), None, &rules, Some(other), now()),
        (apply(), None),
        "another withdrawal is not this decision's"
    );
}

#[test]
fn the_annotation_opts_in_with_always_only() {
    let job = |value: &str| -> k8s_openapi::api::batch::v1::Job {
        let mut job = k8s_openapi::api::batch::v1::Job::default();
        job.metadata.annotations = Some(
            [(
                MOVE_WHEN_UNSCHEDULABLE_ANNOTATION.to_string(),
                value.to_string(),
            )]
            .into(),
        );
        job
    };
    assert!(moves_even_after_a_pod_ran(&job("always")));
    assert!(!moves_even_after_a_pod_ran(&job("never")));
    assert!(!moves_even_after_a_pod_ran(
        &k8s_openapi::api::batch::v1::Job::default()
    ));
}
