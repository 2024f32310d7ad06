//! How a mirror's work changes: one pure step per event, returning the next
//! state and what to do — applies to send, messages for the manager, what to
//! look at again — as data. Its cases are one table
//! (`transition_tests.rs`).
//!
//! A refusal that can clear by itself (`RejectReason::is_permanent` says
//! which) is retried with capped exponential backoff and jitter, and the
//! manager is told whenever its reason changes; a permanent one is reported
//! once.

use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder};
use jobrelay_proto::v1::{ApplyMirror, RejectReason};

use super::{Deletion, Next, PendingApply, Retry, Work};
use crate::report::ApplyFailure;

/// What happens to a mirror.
#[derive(Debug)]
pub(in crate::mirrors) enum Event {
    /// The manager sent an apply: it replaces a waiting one, backoff included.
    Apply(ApplyMirror),
    /// A pass sends the applies whose time has come.
    ApplyDue(Instant),
    /// The API server answered the apply of this revision.
    Answered {
        revision: u64,
        result: Result<(), ApplyFailure>,
        now: Instant,
    },
    /// The manager asked for the mirror's deletion: a waiting apply is dropped.
    Delete(Deletion),
    /// The agent found the mirror to delete itself (an orphan, what is left
    /// of a loss): a waiting apply waits until it is gone.
    Found(Deletion),
    /// The API server confirmed the mirror and every Pod gone.
    Gone,
    /// A new session: a loss is told again.
    NewSession,
    /// A DesiredSet does not name the mirror (the manager no longer wants
    /// it): an apply not sent yet is dropped, on its own or behind a
    /// deletion. One out waits for its answer; what it creates is an orphan.
    Unwanted,
}

/// What a transition asks to be done.
#[derive(Debug, PartialEq)]
pub(in crate::mirrors) enum Command {
    /// Send this apply to the worker's API server.
    Send(ApplyMirror),
    /// Send every waiting apply that is due: this answer held one back.
    SendDue,
    /// Look at the mirror in the next pass.
    LookAgain,
    /// Tell the manager the worker refused the apply of `revision`: for good
    /// (`retry_in` is `None`) or until the backoff runs out.
    Refused {
        revision: u64,
        reason: RejectReason,
        message: String,
        retry_in: Option<Duration>,
    },
    /// Tell the manager the mirror and every Pod are gone.
    Gone(Deletion),
    /// Only logged.
    Note(Note),
}

/// What is only logged.
#[derive(Debug, PartialEq)]
pub(in crate::mirrors) enum Note {
    /// The answer to `revision` came after a newer apply or a deletion.
    Stale { revision: u64 },
    /// The apply waits for something of jobrelay's own to settle.
    Waits(ApplyFailure),
    /// Refused again for the reason already reported.
    RefusedAgain {
        reason: RejectReason,
        message: String,
        retry_in: Duration,
    },
}

/// How refused applies are tried again.
#[derive(Debug, Clone, Copy)]
pub(in crate::mirrors) struct ApplyRetry {
    pub delays: ExponentialBuilder,
    /// The longest wait between two tries.
    pub max: Duration,
}

/// The next work of a mirror after `event`, and what to do.
pub(in crate::mirrors) fn transition(
    work: Work,
    event: Event,
    retry: &ApplyRetry,
) -> (Work, Vec<Command>) {
    match (work, event) {
        (work, Event::Apply(apply)) => (with_apply(work, PendingApply::new(apply)), vec![]),
        (Work::Waiting(pending), Event::ApplyDue(now)) if pending.is_due(now) => {
            let send = Command::Send(pending.apply.clone());
            (applying(pending), vec![send])
        }
        (work, Event::ApplyDue(_)) => (work, vec![]),
        (
            Work::Applying { next },
            Event::Answered {
                revision,
                result,
                now,
            },
        ) => answered(next, revision, result, now, retry),
        (work, Event::Answered { revision, .. }) => {
            (work, vec![Command::Note(Note::Stale { revision })])
        }
        (work, Event::Delete(deletion)) => (
            with_deletion(work, deletion, false),
            vec![Command::LookAgain],
        ),
        (work, Event::Found(deletion)) => (
            with_deletion(work, deletion, true),
            vec![Command::LookAgain],
        ),
        (
            Work::Deleting {
                deletion,
                then_apply,
            },
            Event::Gone,
        ) => {
            let work = then_apply.map_or(Work::Idle, Work::Waiting);
            (work, vec![Command::Gone(deletion)])
        }
        (work, Event::Gone) => (work, vec![]),
        (mut work, Event::NewSession) => {
            if let Some(lost) = work.deletion_mut().and_then(|d| d.lost.as_mut()) {
                lost.reported = false;
            }
            (work, vec![])
        }
        (work, Event::Unwanted) => (without_apply(work), vec![]),
    }
}

/// `work` without the apply that waits in it; one out stays out.
fn without_apply(work: Work) -> Work {
    match work {
        Work::Waiting(_) => Work::Idle,
        Work::Deleting { deletion, .. } => deleting(deletion, None),
        Work::Applying {
            next: Next::Delete { deletion, .. },
        } => delete_after_answer(deletion, None),
        work @ (Work::Idle
        | Work::Applying {
            next: Next::Apply(_),
        }) => work,
    }
}

/// `work` with `pending` waiting in it: in place of an apply waiting, or
/// behind the apply out or the deletion under way.
fn with_apply(work: Work, pending: PendingApply) -> Work {
    match work {
        Work::Idle | Work::Waiting(_) => Work::Waiting(pending),
        Work::Applying {
            next: Next::Apply(_),
        } => applying(pending),
        Work::Applying {
            next: Next::Delete { deletion, .. },
        } => delete_after_answer(deletion, Some(pending)),
        Work::Deleting { deletion, .. } => deleting(deletion, Some(pending)),
    }
}

/// `work` with `deletion` begun, after the apply out if there is one; a
/// deletion under way is kept. An apply waiting is dropped (the manager's
/// delete) or waits until the mirror is gone (`keep_apply`).
fn with_deletion(work: Work, deletion: Deletion, keep_apply: bool) -> Work {
    let keep = |pending: PendingApply| keep_apply.then_some(pending);
    match work {
        Work::Idle => deleting(deletion, None),
        Work::Waiting(pending) => deleting(deletion, keep(pending)),
        Work::Applying {
            next: Next::Apply(pending),
        } => delete_after_answer(deletion, keep(pending)),
        Work::Applying {
            next:
                Next::Delete {
                    deletion: under_way,
                    then_apply,
                },
        } => delete_after_answer(under_way, then_apply.and_then(keep)),
        Work::Deleting {
            deletion: under_way,
            then_apply,
        } => deleting(under_way, then_apply.and_then(keep)),
    }
}

/// What the answer to the apply of `revision` does to what waited for it.
fn answered(
    next: Next,
    revision: u64,
    result: Result<(), ApplyFailure>,
    now: Instant,
    retry: &ApplyRetry,
) -> (Work, Vec<Command>) {
    let stale = Command::Note(Note::Stale { revision });
    let mut pending = match next {
        // The deletion waited for this answer; the newer one waits on.
        Next::Delete {
            deletion,
            then_apply,
        } => {
            let commands = vec![Command::LookAgain, stale, Command::SendDue];
            return (deleting(deletion, then_apply), commands);
        }
        Next::Apply(pending) => pending,
    };
    match (
        settle(Some(pending.apply.revision), revision, &result),
        result,
    ) {
        // The newer one waited for this answer.
        (Settle::Stale, _) => (Work::Waiting(pending), vec![stale, Command::SendDue]),
        (Settle::Done, Err(ApplyFailure::Refused(reason, message))) => {
            let refused = Command::Refused {
                revision,
                reason,
                message,
                retry_in: None,
            };
            (Work::Idle, vec![refused])
        }
        (Settle::Done, _) => (Work::Idle, vec![]),
        (Settle::Again, Err(failure)) => (
            Work::Waiting(pending),
            vec![Command::Note(Note::Waits(failure))],
        ),
        (Settle::Backoff, Err(ApplyFailure::Refused(reason, message))) => {
            let retrying = pending.retry.get_or_insert_with(|| Retry {
                delays: retry.delays.build(),
                reason: RejectReason::Unspecified,
            });
            let delay = retrying.delays.next().unwrap_or(retry.max);
            let again = retrying.reason == reason;
            retrying.reason = reason;
            pending.not_before = Some(now + delay);
            let command = match again {
                true => Command::Note(Note::RefusedAgain {
                    reason,
                    message,
                    retry_in: delay,
                }),
                false => Command::Refused {
                    revision,
                    reason,
                    message,
                    retry_in: Some(delay),
                },
            };
            (Work::Waiting(pending), vec![command])
        }
        // `settle` says Again and Backoff only of a failure.
        (Settle::Again | Settle::Backoff, _) => (Work::Waiting(pending), vec![]),
    }
}

fn applying(pending: PendingApply) -> Work {
    Work::Applying {
        next: Next::Apply(pending),
    }
}

fn deleting(deletion: Deletion, then_apply: Option<PendingApply>) -> Work {
    Work::Deleting {
        deletion,
        then_apply,
    }
}

fn delete_after_answer(deletion: Deletion, then_apply: Option<PendingApply>) -> Work {
    Work::Applying {
        next: Next::Delete {
            deletion,
            then_apply,
        },
    }
}

/// What an answered apply does to the mirror's waiting apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
    /// It is done with: taken, or refused for good.
    Done,
    /// It stays, to be sent at the next pass.
    Again,
    /// It stays, to be sent once the backoff ran out.
    Backoff,
    /// A newer revision arrived while it was out (or the mirror is being
    /// deleted): the answer is for nothing that still waits.
    Stale,
}

/// Decides what an answer to the apply of `applied` (a revision) does, given
/// the revision now waiting for that mirror, if any.
fn settle(waiting: Option<u64>, applied: u64, result: &Result<(), ApplyFailure>) -> Settle {
    if waiting != Some(applied) {
        return Settle::Stale;
    }
    match result {
        Ok(()) => Settle::Done,
        Err(ApplyFailure::Wait(_)) => Settle::Again,
        Err(ApplyFailure::Refused(reason, _)) if reason.is_permanent() => Settle::Done,
        Err(ApplyFailure::Refused(..)) => Settle::Backoff,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answered_apply_is_done_with_waits_or_backs_off_by_what_came_of_it() {
        let refused = |reason| Err(ApplyFailure::Refused(reason, "no".into()));
        assert_eq!(settle(Some(3), 3, &Ok(())), Settle::Done);
        assert_eq!(
            settle(Some(3), 3, &refused(RejectReason::Invalid)),
            Settle::Done,
            "refused for good: reported once, not sent again"
        );
        assert_eq!(
            settle(Some(3), 3, &refused(RejectReason::QuotaExceeded)),
            Settle::Backoff
        );
        assert_eq!(
            settle(Some(3), 3, &Err(ApplyFailure::Wait("older mirror".into()))),
            Settle::Again
        );
    }

    #[test]
    fn an_answer_for_a_revision_no_longer_waiting_changes_nothing() {
        let refused = Err(ApplyFailure::Refused(RejectReason::Invalid, "no".into()));
        for result in [Ok(()), refused] {
            assert_eq!(
                settle(Some(4), 3, &result),
                Settle::Stale,
                "revision 4 arrived while 3 was out: 4 is still sent"
            );
            assert_eq!(settle(None, 3, &result), Settle::Stale, "deleted while out");
        }
    }
}
