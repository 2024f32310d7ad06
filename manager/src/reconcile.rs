//! The manager Job controller: one reconcile per manager Job, triggered by the
//! Job's own changes and by what agents report (through the [`Fleet`]).
//!
//! It decides nothing itself: [`job_life`] says what the next step is and
//! what follows each answer of the fleet; this file does the fleet's part
//! (place, apply, delete), the placement checks that need the registry, and
//! carries out the resulting [`Plan`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tracing::{debug, info, instrument, warn};

use crate::config::Config;
use crate::events::{Events, Reason};
use crate::fleet::Fleet;
use crate::job_life::{self, AWAIT_CLUSTER, Effect, Expiry, KueueAsks, Plan, Step};
use crate::job_writes::{self, Written};
use crate::kueue::controller::is_queued;
use crate::kueue::worker_queue::{not_admitted_by, queue_on_worker};
use crate::kueue::{Reservations, Withdrawal, scheduling};
use crate::mirror::{
    Lifecycle, has_finalizer, is_relayed, is_whole, lifecycle, mirror_job, revision,
};
use crate::pace::Pace;
use crate::placement::{assigned_cluster, pinned_cluster};
use crate::registry::{Refusal, Registry};
use crate::retention::remote_retention;
use crate::retries::Retries;
use crate::status_sync::write_status;
use crate::superseded::{self, Superseded};
use jobrelay_proto::v1::DeleteReason;

/// Field manager of everything the manager writes.
pub const FIELD_MANAGER: &str = "jobrelay-manager";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Job {0} has no {1}")]
    Incomplete(String, &'static str),
    #[error("Job {job}: {source}")]
    Kube {
        job: String,
        #[source]
        source: kube::Error,
    },
}

pub struct Context {
    pub client: kube::Client,
    pub fleet: Arc<Fleet>,
    pub registry: Registry,
    pub events: Events,
    pub origin: String,
    pub config: Config,
    /// Paces deletions of manager Jobs by retention.
    pub deletions: Arc<Pace>,
    /// Backoff of failed reconciles, per Job.
    pub retries: Retries,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Jobs Kueue reserved quota for, waiting on jobrelay's admission check.
    pub reservations: Arc<Reservations>,
    /// Copies of Jobs that this replica's writes replaced.
    pub superseded: Superseded,
}

/// One manager Job and what a reconcile of it works with.
struct Subject<'a> {
    job: &'a Job,
    key: ObjectRef<Job>,
    uid: String,
    jobs: Api<Job>,
    ctx: &'a Context,
}

#[instrument(skip_all, fields(job = %ObjectRef::from_obj(job.as_ref())))]
pub async fn reconcile(job: Arc<Job>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !is_relayed(&job) {
        return Ok(Action::await_change());
    }
    let key = ObjectRef::from_obj(job.as_ref());
    let uid = job
        .uid()
        .ok_or_else(|| Error::Incomplete(key.to_string(), "metadata.uid"))?;
    let namespace = job
        .namespace()
        .ok_or_else(|| Error::Incomplete(key.to_string(), "metadata.namespace"))?;
    if ctx.superseded.is_stale(
        &uid,
        job.metadata.resource_version.as_deref(),
        Instant::now(),
    ) {
        debug!(
            "the cache has not caught up with this replica's last write of the Job; waiting for it"
        );
        return Ok(Action::requeue(superseded::RECHECK));
    }
    let subject = Subject {
        job: &job,
        key: key.clone(),
        uid,
        jobs: Api::namespaced(ctx.client.clone(), &namespace),
        ctx: &ctx,
    };
    let action = subject.reconcile().await.map_err(|source| Error::Kube {
        job: key.to_string(),
        source,
    })?;
    ctx.retries.succeeded(&key);
    Ok(action)
}

impl Subject<'_> {
    async fn reconcile(&self) -> Result<Action, kube::Error> {
        let (job, ctx) = (self.job, self.ctx);
        let mirror = assigned_cluster(job).and_then(|c| ctx.fleet.view(c, &self.uid));
        if lifecycle(job) == Lifecycle::Finished && has_finalizer(job) {
            let (_, warning) = remote_retention(job, ctx.config.retention.remote_after_finished);
            if let Some(warning) = warning {
                warn!(%warning, "invalid retention annotation");
            }
        }
        let now = Timestamp::now();
        let kueue = self.kueue_asks();
        match job_life::next_step(job, mirror.as_ref(), kueue, &ctx.config, now) {
            Step::AwaitChange => Ok(Action::await_change()),
            Step::Requeue(after) => {
                debug!(?after, "nothing to do until then");
                Ok(Action::requeue(after))
            }
            Step::Place => match self.place().await? {
                Ok((held, cluster)) => self.apply(&held, &cluster).await,
                Err(wait) => Ok(wait),
            },
            Step::Hold { cluster } => {
                let held = self.hold(&cluster).await?;
                self.apply(&held, &cluster).await
            }
            Step::Apply { cluster } => self.apply(job, &cluster).await,
            Step::ShowLoss { cluster, lost } => {
                let limit = ctx.config.mirror_lost_limit;
                let plan = job_life::show_loss(job, &cluster, &lost, limit, now);
                self.execute(job, &cluster, plan).await
            }
            Step::Cleanup { cluster, reason } => {
                let outcome = ctx.fleet.cleanup(&cluster, &self.uid, &self.key, reason);
                let lost = ctx.fleet.is_lost(&cluster);
                let plan = job_life::after_cleanup(&cluster, outcome, lost);
                self.execute(job, &cluster, plan).await
            }
            Step::Release => {
                self.wrote(job, job_writes::remove_finalizer(&self.jobs, job).await?);
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
                self.expire(job_life::expiry(since, keep, now), keep, what)
                    .await
            }
            Step::Forget { cluster } => {
                ctx.fleet.forget(&cluster, &self.uid);
                Ok(Action::await_change())
            }
            Step::Withdraw { cluster } => {
                let withdrawal = ctx
                    .reservations
                    .withdrawal(&self.uid)
                    .unwrap_or(Withdrawal {
                        why:
                            "the Job was suspended, and the mirror's own Kueue decides when it runs"
                                .into(),
                        not_admitted: false,
                    });
                let outcome =
                    ctx.fleet
                        .cleanup(&cluster, &self.uid, &self.key, DeleteReason::Withdrawn);
                let lost = ctx.fleet.is_lost(&cluster);
                let plan = job_life::after_withdrawal(
                    job,
                    &cluster,
                    outcome,
                    lost,
                    withdrawal.not_admitted,
                    &withdrawal.why,
                );
                self.execute(job, &cluster, plan).await
            }
        }
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

    /// Chooses the Job's cluster and holds the Job there; `Err` with when to
    /// look again if it cannot go anywhere now.
    async fn place(&self) -> Result<Result<(Job, String), Action>, kube::Error> {
        let (job, ctx) = (self.job, self.ctx);
        let namespace = job.namespace().unwrap_or_default();
        let pinned = pinned_cluster(job);
        if let Some(pinned) = pinned
            && let Some(refusal) = self.pinned_refusal(pinned, &namespace)
        {
            return self.unplaceable(pinned, &namespace, refusal).await.map(Err);
        }
        let reservation = ctx.reservations.get(&self.uid);
        let eligible = |cluster: &str| {
            ctx.registry.admits(cluster, &namespace).is_ok()
                && reservation
                    .as_ref()
                    .is_none_or(|r| r.allowed.allows(cluster))
        };
        // A cluster whose Kueue did not admit the Job in time is tried last.
        let not_admitted = not_admitted_by(job);
        let preferred = |cluster: &str| eligible(cluster) && !not_admitted.contains(cluster);
        let placed = ctx
            .fleet
            .place(&self.uid, &self.key, pinned, preferred)
            .or_else(|| ctx.fleet.place(&self.uid, &self.key, pinned, eligible));
        let Some(cluster) = placed else {
            debug!("no connected worker cluster admits the Job's namespace; waiting");
            return Ok(Err(Action::requeue(AWAIT_CLUSTER)));
        };
        // The cluster and the finalizer are recorded before anything is
        // sent; the mirror goes out from the Job that write returned.
        let held = self.hold(&cluster).await?;
        Ok(Ok((held, cluster)))
    }

    /// Holds the Job for its mirror on `cluster`; returns it as written.
    async fn hold(&self, cluster: &str) -> Result<Job, kube::Error> {
        let held = job_writes::hold(&self.jobs, self.job, cluster).await?;
        self.wrote(self.job, held.metadata.resource_version.clone());
        Ok(held)
    }

    /// Records that a write replaced this copy of the Job: a reconcile handed
    /// it later waits for the cache to catch up.
    fn wrote(&self, job: &Job, written: Written) {
        self.ctx.superseded.wrote(
            &self.uid,
            job.metadata.resource_version.as_deref(),
            written.as_deref(),
            Instant::now(),
        );
    }

    /// Why the cluster a Job is pinned to cannot take it, if it cannot.
    fn pinned_refusal(&self, pinned: &str, namespace: &str) -> Option<Refusal> {
        match self.ctx.registry.admits(pinned, namespace) {
            Err(refusal) => Some(refusal),
            Ok(()) if self.ctx.fleet.is_lost(pinned) => Some(Refusal::Lost),
            Ok(()) => None,
        }
    }

    /// A Job pinned where it cannot go: deactivated if that cluster is Lost,
    /// else left waiting; either way with a warning Event that says why.
    async fn unplaceable(
        &self,
        pinned: &str,
        namespace: &str,
        refusal: Refusal,
    ) -> Result<Action, kube::Error> {
        let note = refusal.explain(pinned, namespace);
        warn!(%note, "cannot place the Job");
        let (reason, next) = if refusal == Refusal::Lost {
            let written =
                job_writes::deactivate(&self.jobs, self.job, "its pinned cluster is Lost").await?;
            self.wrote(self.job, written);
            (Reason::ClusterLost, Action::await_change())
        } else {
            (Reason::Unplaceable, Action::requeue(AWAIT_CLUSTER))
        };
        self.publish(reason, note);
        Ok(next)
    }

    /// Has the mirror of `job` (as held) applied on `cluster`.
    async fn apply(&self, job: &Job, cluster: &str) -> Result<Action, kube::Error> {
        let ctx = self.ctx;
        let revision = revision(job);
        let outcome = match ctx
            .fleet
            .apply_needed(cluster, &self.uid, &self.key, revision)
        {
            Some(outcome) => outcome,
            None => match self.mirror_payload(job, cluster).await? {
                Ok(payload) => {
                    ctx.fleet
                        .ensure_applied(cluster, &self.uid, &self.key, revision, || payload)
                }
                Err(wait) => return Ok(wait),
            },
        };
        let held = ctx
            .fleet
            .view(cluster, &self.uid)
            .is_some_and(|v| v.held_revision.is_some());
        let plan = job_life::after_apply(job, cluster, revision, outcome, held, Timestamp::now());
        self.execute(job, cluster, plan).await
    }

    /// The mirror of `job` for `cluster`, serialised. The cache holds no pod
    /// templates, so a cached Job is read whole first (one a write returned
    /// is whole already); a copy that moved on from
    /// the one held (a newer spec, or another Job of that name) is sent once
    /// the cache has it, and a Job that cannot be mirrored is left alone.
    async fn mirror_payload(
        &self,
        job: &Job,
        cluster: &str,
    ) -> Result<Result<Vec<u8>, Action>, kube::Error> {
        let ctx = self.ctx;
        let read;
        let whole = if is_whole(job) {
            job
        } else {
            let Some(fresh) = self.jobs.get_opt(&self.key.name).await? else {
                return Ok(Err(Action::await_change()));
            };
            if fresh.uid() != job.uid() || revision(&fresh) != revision(job) {
                debug!("the Job changed since it was cached; sending the newer spec once it is");
                return Ok(Err(Action::requeue(superseded::RECHECK)));
            }
            read = fresh;
            &read
        };
        // A Job Kueue has not admitted yet gets its mirror with the
        // constraints Kueue will give it on admission.
        let reservation = (lifecycle(job) == Lifecycle::Suspended)
            .then(|| ctx.reservations.get(&self.uid))
            .flatten();
        // Queued in the worker's own Kueue, the mirror gets that Kueue's
        // flavors when it admits it.
        let worker_queue = ctx.registry.worker_queue(cluster);
        let mirror = mirror_job(whole, &ctx.origin).map(|mut mirror| {
            let queued_on_worker = queue_on_worker(&mut mirror, worker_queue.as_ref());
            if let Some(reservation) = reservation.as_ref().filter(|_| !queued_on_worker) {
                scheduling::apply(&mut mirror, &reservation.scheduling);
            }
            mirror
        });
        Ok(match mirror.map(|m| serde_json::to_vec(&m)) {
            Ok(Ok(payload)) => Ok(payload),
            Ok(Err(error)) => {
                warn!(%error, "cannot serialise the mirror");
                Err(Action::await_change())
            }
            Err(error) => {
                warn!(%error, "cannot mirror");
                Err(Action::await_change())
            }
        })
    }

    /// Deletes the manager Job when its retention ran out, at the pace of
    /// retention deletions: a backlog waits for its turns in the requeue,
    /// never in a reconcile slot.
    async fn expire(
        &self,
        expiry: Expiry,
        keep: Option<Duration>,
        what: &str,
    ) -> Result<Action, kube::Error> {
        match expiry {
            Expiry::Kept => Ok(Action::await_change()),
            Expiry::In(left) => Ok(Action::requeue(left)),
            Expiry::Due => {
                if let Some(wait) = self.ctx.deletions.turn(&self.uid) {
                    return Ok(Action::requeue(wait));
                }
                let kept = keep.unwrap_or_default();
                if job_writes::delete(&self.jobs, self.job, what, kept).await? {
                    self.ctx.deletions.done();
                }
                Ok(Action::await_change())
            }
        }
    }

    /// Carries out a plan's effects in order (a failure ends it; the
    /// reconcile is retried), then says when to look again.
    async fn execute(&self, job: &Job, cluster: &str, plan: Plan) -> Result<Action, kube::Error> {
        let (ctx, jobs) = (self.ctx, &self.jobs);
        for effect in plan.effects {
            let written = match effect {
                Effect::Event(reason, note) => {
                    self.publish(reason, note);
                    None
                }
                Effect::WriteStatus(status) => write_status(jobs, job, &status).await?,
                Effect::Annotate(key, value) => {
                    job_writes::annotate(jobs, job, key, value.as_deref()).await?
                }
                Effect::CountLoss { lost, mirror_uid } => {
                    job_writes::count_loss(jobs, job, lost, &mirror_uid).await?
                }
                Effect::LossShown => {
                    ctx.fleet.lost_accounted(cluster, &self.uid);
                    None
                }
                Effect::RemoveFinalizer => job_writes::remove_finalizer(jobs, job).await?,
                Effect::Forget => {
                    ctx.fleet.forget(cluster, &self.uid);
                    ctx.reservations.withdrawn(&self.uid);
                    None
                }
                Effect::Unplace { not_admitted_by } => {
                    let written =
                        job_writes::unplace(jobs, job, not_admitted_by.as_deref()).await?;
                    ctx.reservations.withdrawn(&self.uid);
                    written
                }
            };
            self.wrote(job, written);
        }
        Ok(plan.then.map_or_else(Action::await_change, Action::requeue))
    }

    /// Records an Event on the Job, and logs it.
    fn publish(&self, reason: Reason, note: String) {
        info!(reason = reason.as_str(), %note, "event");
        self.ctx
            .events
            .publish(&self.job.object_ref(&()), reason, note);
    }
}

/// A failed reconcile is retried with the Job's own backoff.
pub fn error_policy(job: Arc<Job>, error: &Error, ctx: Arc<Context>) -> Action {
    Action::requeue(retry_in(&ObjectRef::from_obj(job.as_ref()), error, &ctx))
}

/// When to retry a Job whose reconcile failed: its own backoff.
pub fn retry_in(key: &ObjectRef<Job>, error: &Error, ctx: &Context) -> Duration {
    let retry_in = ctx.retries.failed(key);
    warn!(%error, ?retry_in, "reconcile failed; retrying");
    retry_in
}
