//! The manager Job controller: one reconcile per manager Job, triggered by the
//! Job's own changes and by what agents report (through the [`Fleet`](crate::fleet::Fleet)).
//!
//! It decides nothing itself: [`crate::job::life`] says what the next step is and
//! what follows each answer of the fleet. This file takes the step to the
//! fleet (cleanup, withdrawal) or to `dispatch.rs`, which places the Job,
//! holds it and has its mirror applied; `effects.rs` carries out the
//! resulting [`plan::Plan`] and the writes, last. One direction: reconcile,
//! dispatch, effects.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::{debug, instrument, warn};

use crate::clusters::worker_cluster::MoveTimeout;
use crate::controller::context::retry_in;
pub use crate::controller::context::{Context, Error};
use crate::controller::superseded;
use crate::controller::writes;
use crate::job::life::{self, KueueAsks, Step};
use crate::job::lifecycle::{Lifecycle, has_finalizer, is_relayed, lifecycle};
use crate::job::placement::{assigned_cluster, pinned_cluster};
use crate::job::plan;
use crate::job::record;
use crate::job::refused;
use crate::job::retention::remote_retention;
use crate::job::stuck;
use crate::job::withdrawal::Withdrawal;
use crate::kinds::Key;
use crate::kueue::controller::is_queued;
use crate::mirror::Mirror;
use jobrelay_proto::v1::DeleteReason;

mod dispatch;
mod effects;

pub use dispatch::Dispatched;
use dispatch::{Placed, Proceed};

/// One manager Job and what a reconcile of it works with.
struct Reconciling<'a, K: Dispatched> {
    job: &'a K,
    key: ObjectRef<K>,
    /// The key the fleet knows the Job by.
    fleet_key: Key,
    uid: String,
    jobs: Api<K>,
    ctx: &'a Context,
}

#[instrument(skip_all, fields(job = %ObjectRef::from_obj(job.as_ref())))]
pub async fn reconcile<K: Dispatched>(job: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !is_relayed(&*job) {
        return Ok(Action::await_change());
    }
    let key = ObjectRef::from_obj(job.as_ref());
    let uid = job
        .uid()
        .ok_or_else(|| Error::Incomplete(key.to_string(), "metadata.uid"))?;
    let namespace = job
        .namespace()
        .ok_or_else(|| Error::Incomplete(key.to_string(), "metadata.namespace"))?;
    if ctx
        .superseded
        .is_stale(&uid, job.meta().resource_version.as_deref(), Instant::now())
    {
        debug!(
            "the cache has not caught up with this replica's last write of the Job; waiting for it"
        );
        return Ok(Action::requeue(superseded::RECHECK));
    }
    let subject = Reconciling {
        job: job.as_ref(),
        key: key.clone(),
        fleet_key: Key::of(&key),
        uid,
        jobs: Api::namespaced(ctx.client.clone(), &namespace),
        ctx: &ctx,
    };
    let action = subject.reconcile().await.map_err(|source| Error::Kube {
        job: key.to_string(),
        source,
    })?;
    ctx.retries.mirrors.succeeded(&Key::of(&key));
    Ok(action)
}

impl<K: Dispatched> Reconciling<'_, K> {
    async fn reconcile(&self) -> Result<Action, kube::Error> {
        let (job, ctx) = (self.job, self.ctx);
        if let Some(restore) = record::to_restore(job, &ctx.sealer) {
            return self.restore_record(restore).await;
        }
        let mirror = assigned_cluster(job).and_then(|c| ctx.fleet.view(c, &self.uid));
        if lifecycle(job) == Lifecycle::Finished && has_finalizer(job) {
            let (_, warning) = remote_retention(job, ctx.config.retention.remote_after_finished);
            if let Some(warning) = warning {
                warn!(%warning, "invalid retention annotation");
            }
        }
        let now = Timestamp::now();
        let kueue = self.kueue_asks();
        let step = life::next_step(job, mirror.as_ref(), kueue, &ctx.config, now);
        let movable = lifecycle(job) == Lifecycle::Active && !self.kueue_decides();
        let step = life::moved_when_lost(step, movable, |c| ctx.fleet.is_lost(c));
        let (step, look_again) = self.moved_off(step, mirror.as_ref(), movable);
        match step {
            Step::AwaitChange => Ok(Action::await_change()),
            Step::Requeue(after) => {
                debug!(?after, "nothing to do until then");
                Ok(Action::requeue(after))
            }
            // Its record gone (jobrelay's finalizer says it was placed), a
            // Job whose mirror the fleet still wants on a cluster stays
            // there. A Job never placed costs no look through the fleet.
            Step::Place
                if has_finalizer(job)
                    && let Some(cluster) = ctx.fleet.wanted_on(&self.uid) =>
            {
                let held = self.hold(&cluster).await?;
                self.apply(&held, &cluster, None).await
            }
            Step::Place => match self.place().await? {
                Proceed::With(Placed { job, cluster }) => self.apply(&job, &cluster, None).await,
                Proceed::Wait(wait) => Ok(wait),
            },
            Step::Hold { cluster } => {
                let held = self.hold(&cluster).await?;
                self.apply(&held, &cluster, None).await
            }
            Step::Apply { cluster } => match self.record_flavors().await? {
                Some(wait) => Ok(wait),
                None => self.apply(job, &cluster, look_again).await,
            },
            Step::ShowLoss { cluster, lost } => {
                let limit = ctx.config.mirror_lost_limit;
                let plan = plan::show_loss(job, &cluster, &lost, limit, now);
                self.execute(job, &cluster, plan).await
            }
            Step::Cleanup { cluster, reason } => {
                let outcome = ctx
                    .fleet
                    .cleanup(&cluster, &self.uid, &self.fleet_key, reason);
                let lost = ctx.fleet.is_lost(&cluster);
                let plan = plan::after_cleanup(&cluster, outcome, lost);
                self.execute(job, &cluster, plan).await
            }
            Step::Release => {
                self.wrote(job, writes::remove_finalizer(&self.jobs, job).await?);
                Ok(Action::await_change())
            }
            Step::Expire {
                since,
                keep,
                what,
                forget,
            } => {
                if let Some(cluster) = forget {
                    ctx.fleet.forget(&cluster, &self.uid);
                }
                self.expire(life::expiry(since, keep, now), keep, what)
                    .await
            }
            Step::Forget { cluster } => {
                ctx.fleet.forget(&cluster, &self.uid);
                Ok(Action::await_change())
            }
            Step::Withdraw { cluster, why } => {
                let default_why = match lifecycle(job) {
                    Lifecycle::Suspended => {
                        "the Job was suspended, and the mirror's own Kueue decides when it runs"
                    }
                    _ => {
                        "its agent, cut off, has suspended the mirror after the cluster's fenceAfter"
                    }
                };
                let withdrawal = ctx
                    .reservations
                    .withdrawal(&self.uid)
                    .or(why)
                    .unwrap_or_else(|| Withdrawal {
                        why: default_why.into(),
                        ..Withdrawal::default()
                    });
                let outcome = ctx.fleet.cleanup(
                    &cluster,
                    &self.uid,
                    &self.fleet_key,
                    DeleteReason::Withdrawn,
                );
                let lost = ctx.fleet.is_lost(&cluster);
                let plan = plan::after_withdrawal(job, &cluster, outcome, lost, &withdrawal, now);
                self.execute(job, &cluster, plan).await
            }
        }
    }

    /// Whether the Job's mirror moves off its cluster: a `movable` Job not
    /// pinned by label, whose Pods find no node there
    /// ([`stuck::moved_when_unschedulable`]: by the cluster's
    /// `unschedulableTimeout` and the Job's own annotation) or which the
    /// worker refuses ([`refused::moved_when_refused`]: by its
    /// `refusedRetryTimeout`); and when to look again.
    fn moved_off(
        &self,
        step: Step,
        mirror: Option<&Mirror>,
        movable: bool,
    ) -> (Step, Option<Duration>) {
        let Step::Apply { cluster } = &step else {
            return (step, None);
        };
        let movable = movable && pinned_cluster(self.job).is_none();
        let refusal_timeout = self
            .ctx
            .registry
            .move_timeout(cluster, MoveTimeout::Refused);
        let rules = stuck::MoveRules {
            movable,
            even_after_a_pod_ran: stuck::moves_even_after_a_pod_ran(self.job),
            timeout: self
                .ctx
                .registry
                .move_timeout(cluster, MoveTimeout::Unschedulable),
        };
        let counts = mirror
            .and_then(|m| m.state.status())
            .and_then(|status| status.read::<K::Status>())
            .and_then(|status| K::pods_counted(&status));
        let reservations = &self.ctx.reservations;
        let under_way = reservations.withdrawal(&self.uid);
        let now = Instant::now();
        let (step, unschedulable_again) =
            stuck::moved_when_unschedulable(step, mirror, counts, &rules, under_way.clone(), now);
        let (step, refused_again) =
            refused::moved_when_refused(step, mirror, movable, refusal_timeout, under_way, now);
        let moved = (
            step,
            unschedulable_again.into_iter().chain(refused_again).min(),
        );
        // Kept until the Job is unplaced (`Effect::Unplace` drops it), so
        // the move goes on once the mirror no longer says its Pods wait.
        if let (
            Step::Withdraw {
                why: Some(withdrawal),
                ..
            },
            _,
        ) = &moved
        {
            reservations.withdraw(&self.uid, withdrawal.clone());
        }
        moved
    }

    /// A Kueue on the manager decides where the Job runs: it names a queue
    /// (or whether Kueue runs is not known yet).
    fn kueue_decides(&self) -> bool {
        is_queued(self.job) && self.ctx.reservations.manager_kueue() != Some(false)
    }

    /// What Kueue asks of the Job: withdraw its mirror (asked through the
    /// admission check, or — with no Kueue on the manager — a suspended Job
    /// whose mirror is queued in its worker's Kueue), place it (quota
    /// reserved), or nothing.
    fn kueue_asks(&self) -> KueueAsks {
        let (job, ctx) = (self.job, self.ctx);
        if ctx.reservations.withdrawal(&self.uid).is_some() {
            return KueueAsks::Withdraw;
        }
        let queued_on_worker = assigned_cluster(job)
            .is_some_and(|c| is_queued(job) && ctx.registry.worker_queue(c).is_some());
        if queued_on_worker
            && lifecycle(job) == Lifecycle::Suspended
            && ctx.reservations.manager_kueue() == Some(false)
        {
            return KueueAsks::Withdraw;
        }
        if ctx.reservations.get(&self.uid).is_some() {
            KueueAsks::Place
        } else {
            KueueAsks::Nothing
        }
    }
}

/// A failed reconcile is retried with the Job's own backoff.
pub fn error_policy<K: Dispatched>(job: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = Key::from_obj(job.as_ref());
    Action::requeue(retry_in(&key, error, &ctx.retries.mirrors))
}
