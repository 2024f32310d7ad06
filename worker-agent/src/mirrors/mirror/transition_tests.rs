//! Every transition of a mirror's work, as one table: the work, what
//! happens, and the work and commands that follow.

use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder};
use jobrelay_proto::v1::{ApplyMirror, RejectReason};

use super::*;
use crate::report::ApplyFailure;

use RejectReason::{Invalid, NamespaceMissing, QuotaExceeded};

struct Case {
    what: &'static str,
    work: Work,
    event: Event,
    then: Work,
    commands: Vec<Command>,
}

fn t(seconds: u64) -> Instant {
    // One origin for the whole table, so cases compare equal.
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(Instant::now) + Duration::from_secs(seconds)
}

/// Without jitter: the first wait is a second.
fn retry() -> ApplyRetry {
    ApplyRetry {
        delays: ExponentialBuilder::default()
            .with_min_delay(Duration::from_secs(1))
            .with_max_delay(Duration::from_secs(60))
            .without_max_times(),
        max: Duration::from_secs(60),
    }
}

fn apply(revision: u64) -> ApplyMirror {
    ApplyMirror {
        origin_uid: "u1".into(),
        revision,
        object: Vec::new(),
        kind: None,
    }
}

fn pending(revision: u64) -> PendingApply {
    PendingApply::new(apply(revision))
}

/// Refused for `reason`, which was told; not before `at`.
fn backing_off(revision: u64, reason: RejectReason, at: u64) -> PendingApply {
    PendingApply {
        not_before: Some(t(at)),
        retry: Some(Retry {
            delays: retry().delays.build(),
            reason,
        }),
        ..pending(revision)
    }
}

fn deletion(name: &str) -> Deletion {
    Deletion::new("ml".into(), name.into(), None, None)
}

fn loss(reported: bool) -> Deletion {
    let lost = Lost {
        mirror_uid: Some("m1".into()),
        observed: "deleted".into(),
        reported,
    };
    Deletion::new("ml".into(), "left".into(), None, Some(lost))
}

fn applying(pending: PendingApply) -> Work {
    Work::Applying {
        next: Next::Apply(pending),
    }
}

fn applying_then_delete(deletion: Deletion, then_apply: Option<PendingApply>) -> Work {
    Work::Applying {
        next: Next::Delete {
            deletion,
            then_apply,
        },
    }
}

fn deleting(deletion: Deletion, then_apply: Option<PendingApply>) -> Work {
    Work::Deleting {
        deletion,
        then_apply,
    }
}

fn answered(revision: u64, result: Result<(), ApplyFailure>) -> Event {
    Event::Answered {
        revision,
        result,
        now: t(10),
    }
}

fn refused(reason: RejectReason) -> Result<(), ApplyFailure> {
    Err(ApplyFailure::Refused(reason, "no".into()))
}

fn told(reason: RejectReason, retry_in: Option<u64>) -> Command {
    Command::Refused {
        revision: 1,
        reason,
        message: "no".into(),
        retry_in: retry_in.map(Duration::from_secs),
    }
}

/// One row per case: what, the work, the event, then the work and the
/// commands.
#[rustfmt::skip]
fn cases() -> Vec<Case> {
    use Command::{LookAgain, Send, SendDue};
    use Work::{Idle, Waiting};
    let row = |what, work, event, then, commands| Case { what, work, event, then, commands };
    let older_mirror = ApplyFailure::Wait("older mirror".into());
    let stale = || Command::Note(Note::Stale { revision: 1 });
    let again = Command::Note(Note::RefusedAgain { reason: QuotaExceeded, message: "no".into(), retry_in: Duration::from_secs(1) });
    vec![
        // Apply.
        row("idle: waits for the pass", Idle, Event::Apply(apply(1)), Waiting(pending(1)), vec![]),
        row("waiting: replaced, backoff and all", Waiting(backing_off(1, QuotaExceeded, 5)), Event::Apply(apply(2)), Waiting(pending(2)), vec![]),
        row("applying: the newer one waits for the answer", applying(pending(1)), Event::Apply(apply(2)), applying(pending(2)), vec![]),
        row("applying, a deletion waiting: it waits after the deletion", applying_then_delete(deletion("asked"), None), Event::Apply(apply(2)), applying_then_delete(deletion("asked"), Some(pending(2))), vec![]),
        row("deleting: waits until gone", deleting(deletion("asked"), None), Event::Apply(apply(2)), deleting(deletion("asked"), Some(pending(2))), vec![]),
        // ApplyDue.
        row("idle: nothing to send", Idle, Event::ApplyDue(t(0)), Idle, vec![]),
        row("waiting: sent", Waiting(pending(1)), Event::ApplyDue(t(0)), applying(pending(1)), vec![Send(apply(1))]),
        row("backing off: not yet", Waiting(backing_off(1, QuotaExceeded, 5)), Event::ApplyDue(t(4)), Waiting(backing_off(1, QuotaExceeded, 5)), vec![]),
        row("backing off: the wait ran out, sent", Waiting(backing_off(1, QuotaExceeded, 5)), Event::ApplyDue(t(5)), applying(backing_off(1, QuotaExceeded, 5)), vec![Send(apply(1))]),
        row("applying: not sent twice", applying(pending(1)), Event::ApplyDue(t(0)), applying(pending(1)), vec![]),
        row("applying, a deletion waiting: nothing sent", applying_then_delete(deletion("asked"), Some(pending(2))), Event::ApplyDue(t(0)), applying_then_delete(deletion("asked"), Some(pending(2))), vec![]),
        row("deleting: the apply waits until gone", deleting(deletion("asked"), Some(pending(2))), Event::ApplyDue(t(0)), deleting(deletion("asked"), Some(pending(2))), vec![]),
        // Answered.
        row("applying: taken", applying(pending(1)), answered(1, Ok(())), Idle, vec![]),
        row("applying: refused for good, told once", applying(pending(1)), answered(1, refused(Invalid)), Idle, vec![told(Invalid, None)]),
        row("applying: an older mirror still going, sent at the next pass", applying(pending(1)), answered(1, Err(older_mirror.clone())), Waiting(pending(1)), vec![Command::Note(Note::Waits(older_mirror.clone()))]),
        row("applying: refused for now, told, backing off", applying(pending(1)), answered(1, refused(QuotaExceeded)), Waiting(backing_off(1, QuotaExceeded, 11)), vec![told(QuotaExceeded, Some(1))]),
        row("applying: refused again for the reason told, not told", applying(backing_off(1, QuotaExceeded, 5)), answered(1, refused(QuotaExceeded)), Waiting(backing_off(1, QuotaExceeded, 11)), vec![again]),
        row("applying: refused for another reason, told", applying(backing_off(1, QuotaExceeded, 5)), answered(1, refused(NamespaceMissing)), Waiting(backing_off(1, NamespaceMissing, 11)), vec![told(NamespaceMissing, Some(1))]),
        row("applying a revision replaced: stale, the newer one sent", applying(pending(2)), answered(1, Ok(())), Waiting(pending(2)), vec![stale(), SendDue]),
        row("applying, a deletion waiting: the deletion goes on", applying_then_delete(deletion("asked"), Some(pending(2))), answered(1, Ok(())), deleting(deletion("asked"), Some(pending(2))), vec![LookAgain, stale(), SendDue]),
        row("applying, a deletion waiting: even the same revision's answer is stale", applying_then_delete(deletion("asked"), Some(pending(1))), answered(1, refused(Invalid)), deleting(deletion("asked"), Some(pending(1))), vec![LookAgain, stale(), SendDue]),
        row("idle: nothing out", Idle, answered(1, Ok(())), Idle, vec![stale()]),
        row("waiting: nothing out", Waiting(pending(1)), answered(1, Ok(())), Waiting(pending(1)), vec![stale()]),
        row("deleting: nothing out", deleting(deletion("asked"), None), answered(1, Ok(())), deleting(deletion("asked"), None), vec![stale()]),
        // Delete: the manager's.
        row("idle: deleting", Idle, Event::Delete(deletion("asked")), deleting(deletion("asked"), None), vec![LookAgain]),
        row("waiting: the apply dropped", Waiting(pending(1)), Event::Delete(deletion("asked")), deleting(deletion("asked"), None), vec![LookAgain]),
        row("applying: the deletion waits for the answer", applying(pending(1)), Event::Delete(deletion("asked")), applying_then_delete(deletion("asked"), None), vec![LookAgain]),
        row("applying, a deletion waiting: it is kept, the apply dropped", applying_then_delete(deletion("found"), Some(pending(2))), Event::Delete(deletion("asked")), applying_then_delete(deletion("found"), None), vec![LookAgain]),
        row("deleting: the deletion kept, the apply dropped", deleting(deletion("found"), Some(pending(2))), Event::Delete(deletion("asked")), deleting(deletion("found"), None), vec![LookAgain]),
        // Found: an orphan, or what is left of a loss.
        row("idle: deleting", Idle, Event::Found(deletion("found")), deleting(deletion("found"), None), vec![LookAgain]),
        row("waiting: the apply waits until gone", Waiting(pending(1)), Event::Found(deletion("found")), deleting(deletion("found"), Some(pending(1))), vec![LookAgain]),
        row("applying: both wait for the answer", applying(pending(1)), Event::Found(deletion("found")), applying_then_delete(deletion("found"), Some(pending(1))), vec![LookAgain]),
        row("applying, a deletion waiting: kept", applying_then_delete(deletion("asked"), None), Event::Found(deletion("found")), applying_then_delete(deletion("asked"), None), vec![LookAgain]),
        row("deleting: kept", deleting(deletion("asked"), Some(pending(2))), Event::Found(deletion("found")), deleting(deletion("asked"), Some(pending(2))), vec![LookAgain]),
        // Gone.
        row("deleting: gone, told", deleting(deletion("asked"), None), Event::Gone, Idle, vec![Command::Gone(deletion("asked"))]),
        row("deleting, an apply waiting: gone, the apply sent at the pass", deleting(deletion("asked"), Some(pending(2))), Event::Gone, Waiting(pending(2)), vec![Command::Gone(deletion("asked"))]),
        row("applying, a deletion waiting: not gone before the answer", applying_then_delete(deletion("asked"), None), Event::Gone, applying_then_delete(deletion("asked"), None), vec![]),
        row("idle: nothing to confirm", Idle, Event::Gone, Idle, vec![]),
        row("waiting: nothing to confirm", Waiting(pending(1)), Event::Gone, Waiting(pending(1)), vec![]),
        row("applying: nothing to confirm", applying(pending(1)), Event::Gone, applying(pending(1)), vec![]),
        // NewSession.
        row("deleting a loss told: told again", deleting(loss(true), None), Event::NewSession, deleting(loss(false), None), vec![]),
        row("applying, a loss waiting: told again", applying_then_delete(loss(true), None), Event::NewSession, applying_then_delete(loss(false), None), vec![]),
        row("deleting at the manager's request: unchanged", deleting(deletion("asked"), None), Event::NewSession, deleting(deletion("asked"), None), vec![]),
        row("idle: unchanged", Idle, Event::NewSession, Idle, vec![]),
        row("waiting: unchanged", Waiting(pending(1)), Event::NewSession, Waiting(pending(1)), vec![]),
        row("applying: unchanged", applying(pending(1)), Event::NewSession, applying(pending(1)), vec![]),
        // Unwanted: a DesiredSet no longer names it.
        row("waiting: the apply dropped", Waiting(pending(1)), Event::Unwanted, Idle, vec![]),
        row("deleting, an apply waiting: the apply dropped", deleting(deletion("found"), Some(pending(2))), Event::Unwanted, deleting(deletion("found"), None), vec![]),
        row("applying, a deletion and an apply waiting: the apply dropped", applying_then_delete(deletion("found"), Some(pending(2))), Event::Unwanted, applying_then_delete(deletion("found"), None), vec![]),
        row("applying: the apply out stays out", applying(pending(1)), Event::Unwanted, applying(pending(1)), vec![]),
        row("idle: unchanged", Idle, Event::Unwanted, Idle, vec![]),
        row("deleting: unchanged", deleting(deletion("asked"), None), Event::Unwanted, deleting(deletion("asked"), None), vec![]),
    ]
}

#[test]
fn every_transition_of_a_mirrors_work() {
    for case in cases() {
        let from = format!("{:?} on {:?}", case.work, case.event);
        let (then, commands) = transition(case.work, case.event, &retry());
        assert_eq!(
            (&then, &commands),
            (&case.then, &case.commands),
            "{}: from {from}",
            case.what
        );
    }
}

#[test]
fn a_record_holding_nothing_is_forgotten_and_gone_forgets_the_mirror_seen() {
    let mut record = Record {
        work: deleting(deletion("asked"), None),
        seen_mirror: Some("m1".into()),
        ..Record::default()
    };
    assert!(!record.holds_nothing() && record.work.is_deleting());
    let commands = record.on(Event::Gone, &retry());
    assert_eq!(commands, [Command::Gone(deletion("asked"))]);
    assert_eq!(record.seen_mirror, None);
    assert!(record.holds_nothing());
}
