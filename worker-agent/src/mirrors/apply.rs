//! The applies the manager sent and the worker has not taken yet: each is
//! sent on its own (the request itself is `write`), its answer settles it. A
//! refusal that can clear by itself (`RejectReason::is_permanent` says
//! which) is retried with capped exponential backoff and jitter, and the
//! manager is told whenever its reason changes; a permanent one is reported
//! once.

use std::sync::Arc;
use std::time::Instant;

use backon::{BackoffBuilder, ExponentialBackoff};
use jobrelay_proto::v1::{
    AgentMessage, ApplyMirror, ApplyRejected, RejectReason, agent_message::Kind,
};
use tracing::{debug, warn};

use super::write::try_apply;
use super::{Mirrors, agent_message};
use crate::report::ApplyFailure;

/// An apply not yet taken by the worker.
pub(super) struct PendingApply {
    pub apply: ApplyMirror,
    /// Not before then; `None`: at the next pass.
    not_before: Option<Instant>,
    /// Set once the worker refused it for a reason that can clear.
    retry: Option<Retry>,
}

struct Retry {
    delays: ExponentialBackoff,
    /// The reason last reported to the manager.
    reason: RejectReason,
}

/// An apply the API server answered: what was sent, and what came of it.
pub struct Applied {
    apply: ApplyMirror,
    result: Result<(), ApplyFailure>,
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

impl Mirrors {
    /// Takes the manager's applies (each replaces a waiting one of its
    /// mirror, backoff included) and sends every one that is due.
    pub fn apply_all(&mut self, applies: Vec<ApplyMirror>) {
        for apply in applies {
            let uid = apply.origin_uid.clone();
            if let Some(desired) = &mut self.desired {
                desired.insert(uid.clone());
            }
            let pending = PendingApply {
                apply,
                not_before: None,
                retry: None,
            };
            self.pending.insert(uid, pending);
        }
        self.apply_due();
    }

    /// Sends every waiting apply that is due, whose previous mirror is gone
    /// and that is not out already; each runs on its own, up to
    /// [`super::REQUEST_CONCURRENCY`] at once, and its answer comes back
    /// through [`Mirrors::applied`]. The agent's passes go on meanwhile, so
    /// a mirror that finished is reported while a burst of others is applied.
    pub(super) fn apply_due(&mut self) {
        let now = Instant::now();
        let due: Vec<ApplyMirror> = self
            .pending
            .iter()
            .filter(|(uid, p)| {
                !self.deleting.contains_key(*uid)
                    && !self.in_flight.contains(*uid)
                    && p.not_before.is_none_or(|at| at <= now)
            })
            .map(|(_, p)| p.apply.clone())
            .collect();
        for apply in due {
            self.in_flight.insert(apply.origin_uid.clone());
            let (client, origin) = (self.client.clone(), self.origin.clone());
            let instance = self.instance.clone();
            let policy = Arc::clone(&self.policy);
            let served = self.objects.served();
            let cached: Vec<_> = self
                .objects
                .of([&apply.origin_uid])
                .into_values()
                .flatten()
                .collect();
            let (slots, answers) = (Arc::clone(&self.apply_slots), self.answers.clone());
            tokio::spawn(async move {
                // `self.apply_slots` is never closed.
                let _slot = slots.acquire().await;
                let result = try_apply(
                    &client,
                    (&origin, &instance),
                    &policy,
                    &served,
                    (&apply, &cached),
                )
                .await;
                let _ = answers.send(Applied { apply, result });
            });
        }
    }

    /// The next answer to an apply sent by [`Mirrors::apply_due`].
    pub async fn applied(&mut self) -> Applied {
        match self.answered.recv().await {
            Some(applied) => applied,
            // `self.answers` keeps the channel open.
            None => futures::future::pending().await,
        }
    }

    /// Records what came of an apply; tells the manager of a refusal.
    pub fn take_answer(&mut self, Applied { apply, result }: Applied, out: &mut Vec<AgentMessage>) {
        let uid = apply.origin_uid.clone();
        self.in_flight.remove(&uid);
        if self.deleting.contains_key(&uid) {
            // Its deletion waited for this answer.
            self.due.insert(uid.clone());
        }
        let waiting = self.pending.get(&uid).map(|p| p.apply.revision);
        match settle(waiting, apply.revision, &result) {
            Settle::Stale => {
                debug!(%uid, revision = apply.revision, "apply answered after a newer one arrived");
                // The newer one waited for this answer.
                self.apply_due();
            }
            Settle::Done => {
                self.pending.remove(&uid);
                if let Err(ApplyFailure::Refused(reason, message)) = result {
                    warn!(%uid, reason = reason.as_str_name(), %message, "apply refused for good");
                    out.push(refusal(&apply, reason, message, None));
                }
            }
            Settle::Again => debug!(%uid, ?result, "apply waits"),
            Settle::Backoff => {
                let (Some(pending), Err(ApplyFailure::Refused(reason, message))) =
                    (self.pending.get_mut(&uid), result)
                else {
                    return;
                };
                let builder = self.apply_retry;
                let retry = pending.retry.get_or_insert_with(|| Retry {
                    delays: builder.build(),
                    reason: RejectReason::Unspecified,
                });
                let delay = retry.delays.next().unwrap_or(self.apply_retry_max);
                pending.not_before = Some(Instant::now() + delay);
                if retry.reason == reason {
                    debug!(%uid, reason = reason.as_str_name(), %message, retry_in = ?delay, "apply refused again");
                    return;
                }
                retry.reason = reason;
                warn!(%uid, reason = reason.as_str_name(), %message, retry_in = ?delay, "apply refused; retrying with backoff");
                out.push(refusal(&apply, reason, message, Some(delay)));
            }
        }
    }
}

fn refusal(
    apply: &ApplyMirror,
    reason: RejectReason,
    message: String,
    retry_in: Option<std::time::Duration>,
) -> AgentMessage {
    agent_message(Kind::ApplyRejected(ApplyRejected {
        origin_uid: apply.origin_uid.clone(),
        revision: apply.revision,
        reason: reason as i32,
        message,
        retry_in: retry_in.and_then(|d| prost_types::Duration::try_from(d).ok()),
    }))
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
