//! A reconcile's dispatch: choosing the manager Job's cluster and holding
//! the Job there, then having its mirror applied — built from a whole Job,
//! since the cache holds no pod templates.

use std::time::Duration;

use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::wire::{FLAVORS_ANNOTATION, QUEUE_NAME_LABEL};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use tracing::{debug, warn};

use crate::clusters::registry::ClusterRefusal;
use crate::controller::superseded;
use crate::controller::writes;
use crate::job::life::AWAIT_CLUSTER;
use crate::job::life::{is_whole, revision};
use crate::job::lifecycle::{Lifecycle, lifecycle};
use crate::job::placement::{Choice, QueuedIn, Wants, pinned_cluster, preferences};
use crate::job::plan;
use crate::kinds::RelayedKind;
use crate::kueue::mirror_scheduling::{self, Flavors};
use crate::kueue::scheduling::{self, FlavorsChange, Scheduling};
use crate::kueue::worker_queue::{
    WorkerQueue, map_queue_label, queue_on_worker, worker_local_queue,
};
use crate::telemetry::events::Reason;

use super::Reconciling;

/// What the controller does with a kind beyond [`RelayedKind`]: what
/// Kueue's flavors and a worker's own Kueue do to its mirror.
pub trait Dispatched: RelayedKind {
    /// What of a Kueue reservation's `scheduling` to record on the object
    /// (see [`scheduling::to_record`]); `None`: nothing to write.
    fn flavors_record(&self, scheduling: &Scheduling) -> Option<FlavorsChange>;

    /// Readies `mirror` (of `whole`) for `cluster`: queued in the worker's
    /// own Kueue, or given the flavors of the reservation it runs under.
    fn for_worker(
        mirror: &mut Self,
        whole: &Self,
        worker_queue: Option<&WorkerQueue>,
        flavors: Flavors,
        reserved: Option<&Scheduling>,
    );
}

impl Dispatched for Job {
    fn flavors_record(&self, scheduling: &Scheduling) -> Option<FlavorsChange> {
        scheduling::to_record(self, scheduling)
    }

    fn for_worker(
        mirror: &mut Job,
        whole: &Job,
        worker_queue: Option<&WorkerQueue>,
        flavors: Flavors,
        reserved: Option<&Scheduling>,
    ) {
        let queued_on_worker = queue_on_worker(mirror, worker_queue);
        let reserved = reserved.filter(|_| !queued_on_worker);
        mirror_scheduling::for_worker(mirror, whole, flavors, reserved);
    }
}

/// A JobSet's flavors are recorded and kept out of its mirror as a Job's,
/// each replicated Job's pod template its own pod set's; queued on its worker, its
/// queue name is mapped and it is created suspended, as a Job is.
impl Dispatched for JobSet {
    fn flavors_record(&self, scheduling: &Scheduling) -> Option<FlavorsChange> {
        scheduling::to_record(self, scheduling)
    }

    fn for_worker(
        mirror: &mut JobSet,
        whole: &JobSet,
        worker_queue: Option<&WorkerQueue>,
        flavors: Flavors,
        reserved: Option<&Scheduling>,
    ) {
        let queued_on_worker = map_queue_label(&mut mirror.metadata, worker_queue);
        let reserved = reserved.filter(|_| !queued_on_worker);
        let Some(spec) = mirror.spec.as_mut() else {
            return;
        };
        if queued_on_worker {
            spec.suspend = Some(true);
        }
        let pods = spec.replicated_jobs.iter_mut().filter_map(|job| {
            let pod = job.template.spec.as_mut()?.template.spec.as_mut()?;
            Some((job.name.as_str(), pod))
        });
        mirror_scheduling::for_worker_pods(pods, whole, flavors, reserved);
    }
}

/// What a step of the dispatch came to: go on with this, or wait as the
/// Action says.
pub(super) enum Proceed<T> {
    With(T),
    Wait(Action),
}

/// A Job held for its mirror on `cluster`, as the write returned it.
pub(super) struct Placed<K> {
    pub job: K,
    pub cluster: String,
}

impl<K: Dispatched> Reconciling<'_, K> {
    /// Chooses the Job's cluster and holds the Job there, or says when to
    /// look again if it cannot go anywhere now.
    pub(super) async fn place(&self) -> Result<Proceed<Placed<K>>, kube::Error> {
        let (job, ctx) = (self.job, self.ctx);
        let namespace = job.namespace().unwrap_or_default();
        let pinned = pinned_cluster(job);
        if let Some(pinned) = pinned
            && let Some(refusal) = self.pinned_refusal(pinned, &namespace)
        {
            return self
                .unplaceable(pinned, &namespace, refusal)
                .await
                .map(Proceed::Wait);
        }
        let reservation = ctx.reservations.get(&self.uid);
        let eligible = |cluster: &str| {
            ctx.registry.admits(cluster, &namespace).is_ok()
                && reservation
                    .as_ref()
                    .is_none_or(|r| r.allowed.allows(cluster))
        };
        // The cluster a mirror was withdrawn from, or whose Kueue did not
        // admit it in time, is tried last; one where its Pods did not
        // become ready is not tried for a while.
        let preferences = preferences(job, Timestamp::now());
        let allowed = |cluster: &str| eligible(cluster) && !preferences.avoids(cluster);
        let preferred = |cluster: &str| allowed(cluster) && !preferences.tries_last(cluster);
        // Where the worker runs its own Kueue, the mirror of a Job that
        // names a queue is queued there, in the mapped LocalQueue.
        let queue = job.labels().get(QUEUE_NAME_LABEL);
        let queued_in = |cluster: &str| {
            let worker = ctx.registry.worker_queue(cluster)?;
            let local_queue = worker_local_queue(queue?, &worker);
            Some(format!("{namespace}/{local_queue}"))
        };
        let wants = Wants {
            pinned,
            fill: reservation.as_ref().and_then(|r| r.allowed.fill()),
            queued_in: queue.is_some().then_some(&queued_in as &QueuedIn),
        };
        let waited = ctx.fleet.awaiting_room(&self.uid).map(|(why, _)| why.short);
        let (uid, key) = (&self.uid, &self.fleet_key);
        let choice = match ctx.fleet.place(uid, key, wants, preferred) {
            Choice::On(cluster) => Choice::On(cluster),
            _ => ctx.fleet.place(uid, key, wants, allowed),
        };
        let cluster = match choice {
            Choice::On(cluster) => cluster,
            Choice::NoRoom(_) => {
                let why = ctx.fleet.awaiting_room(&self.uid).unwrap_or_default().0;
                let note = format!(
                    "no worker cluster has room for the Job's Pods now; it waits here and is placed once one has ({})",
                    why.why
                );
                debug!(%note, "waiting for room");
                // Said once, and again only when what is short changes, not
                // its counts: a waiting Job is looked at on every room
                // report. Each change is an Event of its own, so the Job
                // shows what is short now.
                if waited.as_ref() != Some(&why.short) {
                    self.publish_on(Reason::NoRoom, &why.short, note);
                }
                return Ok(Proceed::Wait(Action::requeue(AWAIT_CLUSTER)));
            }
            Choice::NoCluster => {
                debug!(
                    "no connected worker cluster admits the namespace and mirrors the kind; waiting"
                );
                return Ok(Proceed::Wait(Action::requeue(AWAIT_CLUSTER)));
            }
        };
        // The cluster and the finalizer are recorded before anything is
        // sent; the mirror goes out from the Job that write returned.
        let job = self.hold(&cluster).await?;
        Ok(Proceed::With(Placed { job, cluster }))
    }

    /// Holds the Job for its mirror on `cluster`, recording the flavors of
    /// the Kueue reservation it is placed under; returns it as written.
    pub(super) async fn hold(&self, cluster: &str) -> Result<K, kube::Error> {
        let flavors = self
            .ctx
            .reservations
            .get(&self.uid)
            .and_then(|r| self.job.flavors_record(&r.scheduling));
        let sealer = &self.ctx.sealer;
        let held = writes::hold(&self.jobs, self.job, cluster, flavors, sealer).await?;
        self.wrote(self.job, held.meta().resource_version.clone());
        Ok(held)
    }

    /// A Job placed before Kueue reserved quota with other flavors (or
    /// before jobrelay recorded them) has the reservation's recorded first;
    /// its check waits for that. `Some`: written, look again once the cache
    /// has it.
    pub(super) async fn record_flavors(&self) -> Result<Option<Action>, kube::Error> {
        let Some(reservation) = self.ctx.reservations.get(&self.uid) else {
            return Ok(None);
        };
        let Some(record) = self.job.flavors_record(&reservation.scheduling) else {
            return Ok(None);
        };
        debug!("recording the flavors of Kueue's reservation on the Job");
        let written =
            writes::annotate(&self.jobs, self.job, FLAVORS_ANNOTATION, record.value()).await?;
        let wait = written.is_some().then(Action::await_change);
        self.wrote(self.job, written);
        Ok(wait)
    }

    /// Why the cluster a Job is pinned to cannot take it, if it cannot.
    fn pinned_refusal(&self, pinned: &str, namespace: &str) -> Option<ClusterRefusal> {
        match self.ctx.registry.admits(pinned, namespace) {
            Err(refusal) => Some(refusal),
            Ok(()) if self.ctx.fleet.is_lost(pinned) => Some(ClusterRefusal::Lost),
            Ok(()) => None,
        }
    }

    /// A Job pinned where it cannot go: deactivated if that cluster is Lost,
    /// else left waiting; either way with a warning Event that says why.
    async fn unplaceable(
        &self,
        pinned: &str,
        namespace: &str,
        refusal: ClusterRefusal,
    ) -> Result<Action, kube::Error> {
        let note = refusal.explain(pinned, namespace);
        warn!(%note, "cannot place the Job");
        let (reason, next) = if refusal == ClusterRefusal::Lost {
            let written =
                writes::deactivate(&self.jobs, self.job, "its pinned cluster is Lost").await?;
            self.wrote(self.job, written);
            (Reason::ClusterLost, Action::await_change())
        } else {
            (Reason::Unplaceable, Action::requeue(AWAIT_CLUSTER))
        };
        self.publish(reason, note);
        Ok(next)
    }

    /// Has the mirror of `job` (as held) applied on `cluster`.
    /// Has the mirror applied; `look_again` shortens the wait before the
    /// next look (its Pods wait for a node, and the timeout runs out then).
    pub(super) async fn apply(
        &self,
        job: &K,
        cluster: &str,
        look_again: Option<Duration>,
    ) -> Result<Action, kube::Error> {
        let ctx = self.ctx;
        let revision = revision(job);
        let outcome = match ctx
            .fleet
            .apply_needed(cluster, &self.uid, &self.fleet_key, revision)
        {
            Some(outcome) => outcome,
            None => match self.mirror_payload(job, cluster).await? {
                Proceed::With(payload) => {
                    ctx.fleet
                        .ensure_applied(cluster, &self.uid, &self.fleet_key, revision, || payload)
                }
                Proceed::Wait(wait) => return Ok(wait),
            },
        };
        let held = ctx
            .fleet
            .view(cluster, &self.uid)
            .is_some_and(|v| v.state.held().is_some());
        let mut plan = plan::after_apply(job, cluster, revision, outcome, held, Timestamp::now());
        if let Some(soon) = look_again {
            plan.then = Some(plan.then.map_or(soon, |then| then.min(soon)));
        }
        self.execute(job, cluster, plan).await
    }

    /// The mirror of `job` for `cluster`, serialised. The cache holds no pod
    /// templates, so a cached Job is read whole first (one a write returned
    /// is whole already); a copy that moved on from
    /// the one held (a newer spec, or another Job of that name) is sent once
    /// the cache has it, and a Job that cannot be mirrored is left alone.
    async fn mirror_payload(
        &self,
        job: &K,
        cluster: &str,
    ) -> Result<Proceed<Vec<u8>>, kube::Error> {
        let ctx = self.ctx;
        let read;
        let whole = if is_whole(job) {
            job
        } else {
            let Some(fresh) = self.jobs.get_opt(&self.key.name).await? else {
                return Ok(Proceed::Wait(Action::await_change()));
            };
            if fresh.uid() != job.uid() || revision(&fresh) != revision(job) {
                debug!("the Job changed since it was cached; sending the newer spec once it is");
                return Ok(Proceed::Wait(Action::requeue(superseded::RECHECK)));
            }
            read = fresh;
            &read
        };
        // A Job Kueue has not admitted yet waits on a reservation, whose
        // flavors the mirror gets at once if opted in.
        let reservation = (lifecycle(job) == Lifecycle::Suspended)
            .then(|| ctx.reservations.get(&self.uid))
            .flatten();
        // Queued in the worker's own Kueue, the mirror gets that Kueue's
        // flavors when it admits it.
        let worker_queue = ctx.registry.worker_queue(cluster);
        let mirror = whole.mirror(&ctx.origin).map(|mut mirror| {
            let reserved = reservation.as_ref().map(|r| &r.scheduling);
            K::for_worker(
                &mut mirror,
                whole,
                worker_queue.as_ref(),
                ctx.flavors,
                reserved,
            );
            mirror
        });
        Ok(match mirror.map(|m| serde_json::to_vec(&m)) {
            Ok(Ok(payload)) => Proceed::With(payload),
            Ok(Err(error)) => {
                warn!(%error, "cannot serialise the mirror");
                Proceed::Wait(Action::await_change())
            }
            Err(error) => {
                warn!(%error, "cannot mirror");
                self.publish(
                    Reason::Unplaceable,
                    format!("cannot mirror the Job: {error}"),
                );
                Proceed::Wait(Action::await_change())
            }
        })
    }
}
