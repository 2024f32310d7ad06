//! When a mirror its worker refuses moves on, as one table.

use std::time::{Duration, Instant};

use jobrelay_proto::v1::RejectReason;

use super::*;
use crate::kinds::Key;
use crate::mirror::Rejection;

const TIMEOUT: Duration = Duration::from_secs(120);

fn now() -> Instant {
    static NOW: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    // Far enough from the clock's origin to subtract any wait below.
    *NOW.get_or_init(|| Instant::now() + Duration::from_secs(3600))
}

fn mirror(state: State) -> Mirror {
    let job = kube::runtime::reflector::ObjectRef::<k8s_openapi::api::batch::v1::Job>::new("j");
    Mirror {
        key: Key::of(&job.within("ns")),
        state,
    }
}

/// Refused for `reason` since `ago` seconds.
fn refused_for(reason: RejectReason, ago: u64) -> State {
    State::Refused {
        rejection: Rejection {
            revision: 1,
            reason,
            message: "namespaces \"team-a\" not found".into(),
            retry_in: Some(Duration::from_secs(5)),
            since: now() - Duration::from_secs(ago),
        },
        sent: None,
        held: None,
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
fn when_a_refused_mirror_moves() {
    use RejectReason::{Invalid, NamespaceMissing, QuotaExceeded};
    let cases = [
        ("not refused",                         State::Unsent,                        true,  None,  Then::Stays),
        ("refused for good: the Job fails",     refused_for(Invalid, 500),            true,  None,  Then::Stays),
        ("refused a while: looked at again",    refused_for(NamespaceMissing, 20),    true,  None,  Then::Again(100)),
        ("refused the timeout: moves",          refused_for(QuotaExceeded, 120),      true,  None,  Then::Moves),
        ("pinned: tried there for ever",        refused_for(NamespaceMissing, 500),   false, None,  Then::Again(120)),
        ("a move under way goes on",            State::Unsent,                        true,  Some(true), Then::Moves),
        ("another withdrawal is not this one",  State::Unsent,                        true,  Some(false), Then::Stays),
    ];
    for (what, state, movable, under_way, then) in cases {
        let under_way = under_way.map(|refused| Withdrawal { why: "before".into(), refused, ..Withdrawal::default() });
        let mirror = mirror(state);
        let step = Step::Apply { cluster: "w1".into() };
        let got = match moved_when_refused(step, Some(&mirror), movable, TIMEOUT, under_way, now()) {
            (Step::Withdraw { .. }, _) => Then::Moves,
            (Step::Apply { .. }, Some(again)) => Then::Again(again.as_secs()),
            (Step::Apply { .. }, None) => Then::Stays,
            (other, _) => panic!("{what}: {other:?}"),
        };
        assert_eq!(got, then, "{what}");
    }
}

#[test]
fn the_refusal_is_told_while_it_waits_and_when_it_moves() {
    let waiting = refused(
        "w1",
        &refused_for(RejectReason::NamespaceMissing, 20),
        true,
        TIMEOUT,
        now(),
    );
    let Refused::Waiting { why, .. } = waiting else {
        panic!("{waiting:?}");
    };
    assert!(
        why.starts_with("cluster w1 refused the Job (REJECT_REASON_NAMESPACE_MISSING): namespaces"),
        "{why}"
    );
    assert!(
        why.ends_with("after the cluster's refusedRetryTimeout (120s)"),
        "{why}"
    );
    let moves = refused(
        "w1",
        &refused_for(RejectReason::NamespaceMissing, 130),
        true,
        TIMEOUT,
        now(),
    );
    let Refused::TooLong(why) = moves else {
        panic!("{moves:?}");
    };
    assert!(
        why.contains("for 130s (its refusedRetryTimeout is 120s)"),
        "{why}"
    );
    assert!(why.ends_with("cluster w1 tried last"), "{why}");
}

#[test]
fn only_a_job_being_applied_moves() {
    let mirror = mirror(refused_for(RejectReason::NamespaceMissing, 500));
    let (step, again) =
        moved_when_refused(Step::AwaitChange, Some(&mirror), true, TIMEOUT, None, now());
    assert_eq!((step, again), (Step::AwaitChange, None));
}
