//! What a reconcile writes and records: the effects of a [`Plan`] carried
//! out in order, the manager Job deleted when its retention ran out, the
//! Events, and the note that a write replaced the copy of the Job in hand.
//! The last step of every reconcile; it calls nothing back.

use std::time::{Duration, Instant};

use kube::runtime::controller::Action;
use tracing::info;

use super::{Dispatched, Reconciling};
use crate::controller::writes::{self, Written, write_status};
use crate::job::life::Expiry;
use crate::job::plan::{Effect, Plan};
use crate::job::record::{self, Restore};
use crate::telemetry::events::Reason;

impl<K: Dispatched> Reconciling<'_, K> {
    /// Records that a write replaced this copy of the Job: a reconcile handed
    /// it later waits for the cache to catch up.
    pub(super) fn wrote(&self, job: &K, written: Written) {
        self.ctx.superseded.wrote(
            &self.uid,
            job.meta().resource_version.as_deref(),
            written.as_deref(),
            Instant::now(),
        );
    }

    /// Deletes the manager Job when its retention ran out, at the pace of
    /// retention deletions: a backlog waits for its turns in the requeue,
    /// never in a reconcile slot.
    pub(super) async fn expire(
        &self,
        expiry: Expiry,
        keep: Option<Duration>,
        what: &str,
    ) -> Result<Action, kube::Error> {
        match expiry {
            Expiry::Never => Ok(Action::await_change()),
            Expiry::In(left) => Ok(Action::requeue(left)),
            Expiry::Due => {
                if let Some(wait) = self.ctx.deletions.turn(&self.uid) {
                    return Ok(Action::requeue(wait));
                }
                let kept = keep.unwrap_or_default();
                if writes::delete(&self.jobs, self.job, what, kept).await? {
                    self.ctx.deletions.done();
                }
                Ok(Action::await_change())
            }
        }
    }

    /// Carries out a plan's effects in order (a failure ends it; the
    /// reconcile is retried), then says when to look again.
    pub(super) async fn execute(
        &self,
        job: &K,
        cluster: &str,
        plan: Plan<K::Status>,
    ) -> Result<Action, kube::Error> {
        let (ctx, jobs) = (self.ctx, &self.jobs);
        for effect in plan.effects {
            let written = match effect {
                Effect::Event(reason, note) => {
                    self.publish(reason, note);
                    None
                }
                Effect::WriteStatus(status) => write_status(jobs, job, &status).await?,
                Effect::Annotate(key, value) => {
                    writes::annotate(jobs, job, key, value.as_deref()).await?
                }
                Effect::CountLoss { lost, mirror_uid } => {
                    writes::count_loss(jobs, job, lost, &mirror_uid).await?
                }
                Effect::LossShown => {
                    ctx.fleet.lost_accounted(cluster, &self.uid);
                    None
                }
                Effect::RemoveFinalizer => writes::remove_finalizer(jobs, job).await?,
                Effect::Forget => {
                    ctx.fleet.forget(cluster, &self.uid);
                    ctx.reservations.withdrawn(&self.uid, &self.fleet_key);
                    None
                }
                Effect::Unplace {
                    from,
                    not_admitted,
                    avoid_until,
                } => {
                    let written =
                        writes::unplace(jobs, job, &from, not_admitted, avoid_until).await?;
                    ctx.reservations.withdrawn(&self.uid, &self.fleet_key);
                    written
                }
            };
            self.wrote(job, written);
        }
        Ok(plan.then.map_or_else(Action::await_change, Action::requeue))
    }

    /// Writes jobrelay's record of where the Job runs back over the one
    /// `claimed` in its place (or seals one an earlier jobrelay wrote),
    /// telling the Job when the claim differed. With no record left, it is
    /// where the fleet wants its mirror, if anywhere.
    pub(super) async fn restore_record(&self, restore: Restore<'_>) -> Result<Action, kube::Error> {
        let claimed = restore.claimed;
        let placed = restore
            .placed
            .or_else(|| self.ctx.fleet.wanted_on(&self.uid));
        let placed = placed.as_deref();
        let sealer = &self.ctx.sealer;
        let written = writes::restore_record(&self.jobs, self.job, placed, sealer).await?;
        if placed != Some(claimed) {
            let note = record::restored_note(claimed, placed);
            self.publish(Reason::PlacementRecordRestored, note);
        }
        self.wrote(self.job, written);
        Ok(Action::await_change())
    }

    /// Records an Event on the Job, and logs it.
    pub(super) fn publish(&self, reason: Reason, note: String) {
        self.publish_on(reason, "", note);
    }

    /// Publishes `reason` in a series of its own per `topic`.
    pub(super) fn publish_on(&self, reason: Reason, topic: &str, note: String) {
        info!(reason = reason.as_str(), %note, "event");
        self.ctx
            .events
            .publish_on(&self.job.object_ref(&()), reason, topic, note);
    }
}
