//! The manager Job controller: one reconcile per manager Job, triggered by the
//! Job's own changes and by what agents report (through the [`Fleet`]).
//!
//! - Active: hold the finalizer and the chosen cluster (both recorded before
//!   anything is sent), have the mirror applied there (`status_sync` copies
//!   its status back).
//! - Suspended: have the mirror deleted; resuming applies it again.
//! - Finished: keep the mirror for `retention.remoteAfterFinished` (or the
//!   Job's annotation), then have it deleted and release the finalizer; delete
//!   the manager Job itself after `retention.managerAfterFinished`.
//! - Being deleted: have the mirror deleted and, once the agent confirmed
//!   every Pod gone, release the finalizer.
//! - Its mirror lost behind jobrelay's back: the loss is counted on the Job
//!   and the Job runs again once the remains are gone, or ends `Failed`
//!   (`RemoteJobLost`) at `mirrorLostLimit` (the decision is `lost::on_lost`).
//! - Refused by the worker: for good → `Failed` (`RemoteRejected`); for a
//!   reason that can clear → shown in an annotation while the agent retries.
//! - Deactivated (its pinned cluster is Lost): never dispatched again;
//!   deleted after `retention.afterDeactivated`.

use std::sync::Arc;
use std::time::Duration;

use jobrelay_proto::v1::DeleteReason;
use jobrelay_proto::wire::{
    CLUSTER_KEY, DEACTIVATED_ANNOTATION, DISPATCH_WAITING_ANNOTATION, LAST_LOST_MIRROR_ANNOTATION,
    MIRRORS_LOST_ANNOTATION, REMOTE_CLEANUP_FINALIZER, REMOTE_JOB_LOST, REMOTE_REJECTED,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tracing::{debug, info, instrument, warn};

use crate::config::Config;
use crate::events::{Events, Reason};
use crate::fleet::{Apply, Cleanup, Fleet, LostMirror, Rejection};
use crate::lost::{LostStep, lost_so_far, on_lost};
use crate::mirror::{Lifecycle, has_finalizer, is_relayed, lifecycle, mirror_job, revision};
use crate::pace::Pace;
use crate::placement::{assigned_cluster, pinned_cluster};
use crate::registry::{Refusal, Registry};
use crate::retention::{deactivated_at, finished_at, remaining, remote_retention};
use crate::status;
use crate::status_sync::write_status;

/// Field manager of everything the manager writes.
pub const FIELD_MANAGER: &str = "jobrelay-manager";

/// How long to wait before looking again when an agent must act first.
const AWAIT_AGENT: Duration = Duration::from_secs(30);
/// How long to wait when the Job's cluster is not connected.
const AWAIT_CLUSTER: Duration = Duration::from_secs(10);
/// A periodic look at every active Job, in case a trigger was missed.
const RESYNC: Duration = Duration::from_secs(300);

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
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &namespace);
    let kube_err = |source| Error::Kube {
        job: key.to_string(),
        source,
    };
    let assigned = assigned_cluster(&job).map(str::to_string);

    match lifecycle(&job) {
        Lifecycle::Active if deactivated_at(&job).is_some() => {
            let keep = ctx.config.retention.after_deactivated;
            expire(&job, deactivated_at(&job), keep, "deactivated", &jobs, &ctx)
                .await
                .map_err(kube_err)
        }
        Lifecycle::Active => {
            let lost = assigned
                .as_deref()
                .and_then(|cluster| Some((cluster, ctx.fleet.view(cluster, &uid)?.lost?)))
                .filter(|(_, lost)| !lost.accounted);
            if let Some((cluster, lost)) = lost {
                return show_loss(&job, &uid, cluster, &lost, &jobs, &ctx)
                    .await
                    .map_err(kube_err);
            }
            dispatch(&job, &key, &uid, assigned, &jobs, &ctx)
                .await
                .map_err(kube_err)
        }
        Lifecycle::Suspended => {
            let Some(cluster) = assigned else {
                return Ok(Action::await_change());
            };
            match ctx
                .fleet
                .cleanup(&cluster, &uid, &key, DeleteReason::Suspended)
            {
                Cleanup::Gone { .. } => {
                    if let Some(last) = ctx.fleet.view(&cluster, &uid).and_then(|v| v.status) {
                        write_status(&jobs, &job, &status::after_suspension(&last))
                            .await
                            .map_err(kube_err)?;
                    }
                    Ok(Action::await_change())
                }
                outcome => Ok(awaiting_cleanup(&ctx, &job, &cluster, outcome).await),
            }
        }
        Lifecycle::Finished if has_finalizer(&job) => {
            let (keep, warning) =
                remote_retention(&job, ctx.config.retention.remote_after_finished);
            if let Some(warning) = warning {
                warn!(%warning, "invalid retention annotation");
            }
            // A mirror lost or gone keeps nothing worth waiting for.
            let remains = assigned
                .as_deref()
                .and_then(|cluster| ctx.fleet.view(cluster, &uid))
                .is_none_or(|v| v.lost.is_none() && v.gone.is_none());
            if remains
                && let Some(left) =
                    finished_at(&job).and_then(|at| remaining(Timestamp::now(), at, keep))
            {
                debug!(?left, "keeping the finished Job's mirror for its logs");
                return Ok(Action::requeue(left));
            }
            release(
                &job,
                &key,
                &uid,
                assigned,
                DeleteReason::RetentionExpired,
                &jobs,
                &ctx,
            )
            .await
            .map_err(kube_err)
        }
        Lifecycle::Finished => {
            if let Some(cluster) = &assigned {
                ctx.fleet.forget(cluster, &uid);
            }
            let keep = ctx.config.retention.manager_after_finished;
            expire(&job, finished_at(&job), keep, "finished", &jobs, &ctx)
                .await
                .map_err(kube_err)
        }
        Lifecycle::Deleting if has_finalizer(&job) => release(
            &job,
            &key,
            &uid,
            assigned,
            DeleteReason::ManagerJobDeleted,
            &jobs,
            &ctx,
        )
        .await
        .map_err(kube_err),
        Lifecycle::Deleting => {
            if let Some(cluster) = &assigned {
                ctx.fleet.forget(cluster, &uid);
            }
            Ok(Action::await_change())
        }
    }
}

/// Has the mirror deleted and, once the agent confirmed it and every Pod
/// gone, releases the manager Job.
async fn release(
    job: &Job,
    key: &ObjectRef<Job>,
    uid: &str,
    assigned: Option<String>,
    reason: DeleteReason,
    jobs: &Api<Job>,
    ctx: &Context,
) -> Result<Action, kube::Error> {
    let Some(cluster) = assigned else {
        remove_finalizer(jobs, job).await?;
        return Ok(Action::await_change());
    };
    match ctx.fleet.cleanup(&cluster, uid, key, reason) {
        Cleanup::Gone { pods_deleted } => {
            remove_finalizer(jobs, job).await?;
            ctx.fleet.forget(&cluster, uid);
            let note = format!(
                "mirror Job and every Pod gone from cluster {cluster} ({pods_deleted} Pods deleted by the agent)"
            );
            info!(%cluster, pods_deleted, "remote cleanup confirmed");
            ctx.events
                .publish(&job.object_ref(&()), Reason::RemotePodsGone, note)
                .await;
            Ok(Action::await_change())
        }
        Cleanup::Disconnected if ctx.fleet.is_lost(&cluster) => {
            remove_finalizer(jobs, job).await?;
            ctx.fleet.forget(&cluster, uid);
            let note = format!(
                "cluster {cluster} is Lost: the finalizer is released without its confirmation; its agent deletes the mirror and its Pods when it returns"
            );
            warn!(%cluster, "releasing a Job whose mirror sits on a Lost cluster");
            ctx.events
                .publish(&job.object_ref(&()), Reason::ClusterLost, note)
                .await;
            Ok(Action::await_change())
        }
        outcome => Ok(awaiting_cleanup(ctx, job, &cluster, outcome).await),
    }
}

/// Deletes the manager Job once `keep` has passed since `since` (paced, so a
/// backlog is worked off gradually); `None` keeps it for good.
async fn expire(
    job: &Job,
    since: Option<Timestamp>,
    keep: Option<Duration>,
    what: &str,
    jobs: &Api<Job>,
    ctx: &Context,
) -> Result<Action, kube::Error> {
    let (Some(keep), Some(since)) = (keep, since) else {
        return Ok(Action::await_change());
    };
    if let Some(left) = remaining(Timestamp::now(), since, keep) {
        return Ok(Action::requeue(left));
    }
    // A backlog waits for its turns in the requeue, not in a reconcile slot.
    if let Some(wait) = ctx.deletions.turn(&job.uid().unwrap_or_default()) {
        return Ok(Action::requeue(wait));
    }
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: job.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match jobs.delete(&job.name_any(), &params).await {
        Ok(_) => {
            info!(after = ?keep, "deleting the manager Job: {what} and its retention ran out");
            ctx.deletions.done();
        }
        Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => {}
        Err(e) => return Err(e),
    }
    Ok(Action::await_change())
}

async fn awaiting_cleanup(ctx: &Context, job: &Job, cluster: &str, outcome: Cleanup) -> Action {
    match outcome {
        Cleanup::Started { first: true } => {
            let note = format!("deleting the mirror on cluster {cluster} (Background propagation)");
            ctx.events
                .publish(&job.object_ref(&()), Reason::RemoteCleanupStarted, note)
                .await;
            Action::requeue(AWAIT_AGENT)
        }
        Cleanup::Disconnected => Action::requeue(AWAIT_CLUSTER),
        _ => Action::requeue(AWAIT_AGENT),
    }
}

async fn dispatch(
    job: &Job,
    key: &ObjectRef<Job>,
    uid: &str,
    assigned: Option<String>,
    jobs: &Api<Job>,
    ctx: &Context,
) -> Result<Action, kube::Error> {
    let namespace = job.namespace().unwrap_or_default();
    let cluster = match &assigned {
        Some(cluster) => cluster.clone(),
        None => {
            let pinned = pinned_cluster(job);
            if let Some(pinned) = pinned
                && let Some(refusal) = pinned_refusal(ctx, pinned, &namespace)
            {
                return unplaceable(jobs, job, ctx, pinned, &namespace, refusal).await;
            }
            let eligible = |cluster: &str| ctx.registry.admits(cluster, &namespace).is_ok();
            match ctx.fleet.place(uid, key, pinned, eligible) {
                Some(cluster) => cluster,
                None => {
                    debug!("no connected worker cluster admits the Job's namespace; waiting");
                    return Ok(Action::requeue(AWAIT_CLUSTER));
                }
            }
        }
    };
    // The cluster and the finalizer are recorded before anything is sent;
    // the mirror goes out from the Job that write returned.
    let held;
    let job = if assigned.is_none() || !has_finalizer(job) {
        if assigned.is_none()
            && ctx
                .fleet
                .view(&cluster, uid)
                .is_some_and(|v| v.apply_sent.is_some())
        {
            // Sent only after its hold was written: this copy of the Job is
            // older than that write, and holding it again could only conflict.
            debug!("the cache has not seen the hold yet; waiting for it");
            return Ok(Action::await_change());
        }
        held = hold(jobs, job, &cluster).await?;
        &held
    } else {
        job
    };

    let mirror = match mirror_job(job, &ctx.origin) {
        Ok(mirror) => mirror,
        Err(error) => {
            warn!(%error, "cannot mirror");
            return Ok(Action::await_change());
        }
    };
    let revision = revision(job);
    let payload = match serde_json::to_vec(&mirror) {
        Ok(payload) => payload,
        Err(error) => {
            warn!(%error, "cannot serialise the mirror");
            return Ok(Action::await_change());
        }
    };
    let outcome = ctx
        .fleet
        .ensure_applied(&cluster, uid, key, revision, || payload);
    let next = match outcome {
        Apply::Sent => {
            let attempt = lost_so_far(job).count + 1;
            let note = if attempt > 1 {
                format!("sent to cluster {cluster} (revision {revision}), attempt {attempt}")
            } else {
                format!("sent to cluster {cluster} (revision {revision})")
            };
            ctx.events
                .publish(&job.object_ref(&()), Reason::Dispatched, note)
                .await;
            Action::requeue(RESYNC)
        }
        Apply::Rejected(rejection) => {
            let message = refusal_text(&cluster, &rejection);
            let shown = status::shown(job.status.as_ref());
            let failed = status::failed(&shown, REMOTE_REJECTED, &message, &now());
            write_status(jobs, job, &failed).await?;
            info!(%message, "failed: the worker refused the Job for good");
            Action::await_change()
        }
        Apply::Waiting(rejection) => {
            let text = refusal_text(&cluster, &rejection);
            set_annotation(jobs, job, DISPATCH_WAITING_ANNOTATION, Some(&text)).await?;
            Action::requeue(AWAIT_AGENT)
        }
        Apply::InPlace => {
            if ctx
                .fleet
                .view(&cluster, uid)
                .is_some_and(|v| v.held_revision.is_some())
            {
                set_annotation(jobs, job, DISPATCH_WAITING_ANNOTATION, None).await?;
            }
            Action::requeue(RESYNC)
        }
        Apply::AwaitingGone => Action::requeue(AWAIT_AGENT),
        Apply::Disconnected => Action::requeue(AWAIT_CLUSTER),
    };
    Ok(next)
}

/// A refusal in words a user can act on.
fn refusal_text(cluster: &str, rejection: &Rejection) -> String {
    format!(
        "cluster {cluster} refused the Job ({}): {}",
        rejection.reason.as_str_name(),
        rejection.message
    )
}

/// Shows a lost mirror on its manager Job: the loss counted in its
/// annotations (once per lost mirror, whatever the reports), a warning
/// Event, and a status with no Pods running — or, at the limit, `Failed`.
async fn show_loss(
    job: &Job,
    uid: &str,
    cluster: &str,
    lost: &LostMirror,
    jobs: &Api<Job>,
    ctx: &Context,
) -> Result<Action, kube::Error> {
    let limit = ctx.config.mirror_lost_limit;
    let step = on_lost(lifecycle(job), &lost_so_far(job), &lost.mirror_uid, limit);
    let lost_count = match step {
        LostStep::AlreadyShown | LostStep::CleanUpOnly => {
            ctx.fleet.lost_accounted(cluster, uid);
            return Ok(Action::requeue(Duration::ZERO));
        }
        LostStep::RunAgain { lost } | LostStep::Fail { lost } => lost,
    };
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": job.resource_version(),
            "annotations": {
                MIRRORS_LOST_ANNOTATION: lost_count.to_string(),
                LAST_LOST_MIRROR_ANNOTATION: lost.mirror_uid,
            },
        }
    });
    let counted = jobs
        .patch(
            &job.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    let shown = status::shown(counted.status.as_ref());
    let what = format!(
        "the mirror on cluster {cluster} was lost: {}",
        lost.observed
    );
    let note = if let LostStep::Fail { .. } = step {
        let message = format!(
            "{what}; that is {lost_count} lost of {limit} allowed (mirrorLostLimit), so the Job is not run again"
        );
        write_status(
            jobs,
            &counted,
            &status::failed(&shown, REMOTE_JOB_LOST, &message, &now()),
        )
        .await?;
        message
    } else {
        write_status(jobs, &counted, &status::after_suspension(&shown)).await?;
        format!(
            "{what}; it runs again as attempt {} of {limit} once the worker shows none of its Pods",
            lost_count + 1
        )
    };
    warn!(%note, "mirror lost");
    ctx.fleet.lost_accounted(cluster, uid);
    ctx.events
        .publish(&job.object_ref(&()), Reason::RemoteJobLost, note)
        .await;
    Ok(Action::requeue(AWAIT_AGENT))
}

/// Sets (or, with `None`, removes) one annotation of the Job, unless it
/// already reads so.
async fn set_annotation(
    jobs: &Api<Job>,
    job: &Job,
    key: &str,
    value: Option<&str>,
) -> Result<(), kube::Error> {
    if job.annotations().get(key).map(String::as_str) == value {
        return Ok(());
    }
    let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
    jobs.patch(
        &job.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

fn now() -> String {
    Timestamp::now().to_string()
}

/// Why the cluster a Job is pinned to cannot take it, if it cannot.
fn pinned_refusal(ctx: &Context, pinned: &str, namespace: &str) -> Option<Refusal> {
    match ctx.registry.admits(pinned, namespace) {
        Err(refusal) => Some(refusal),
        Ok(()) if ctx.fleet.is_lost(pinned) => Some(Refusal::Lost),
        Ok(()) => None,
    }
}

/// A Job pinned where it cannot go: deactivated if that cluster is Lost,
/// else left waiting; either way with a warning Event that says why.
async fn unplaceable(
    jobs: &Api<Job>,
    job: &Job,
    ctx: &Context,
    pinned: &str,
    namespace: &str,
    refusal: Refusal,
) -> Result<Action, kube::Error> {
    let note = refusal.explain(pinned, namespace);
    warn!(%note, "cannot place the Job");
    let (reason, next) = if refusal == Refusal::Lost {
        deactivate(jobs, job, "its pinned cluster is Lost").await?;
        (Reason::ClusterLost, Action::await_change())
    } else {
        (Reason::Unplaceable, Action::requeue(AWAIT_CLUSTER))
    };
    ctx.events.publish(&job.object_ref(&()), reason, note).await;
    Ok(next)
}

/// Adds the finalizer and records the cluster, in one write that fails if
/// the Job changed meanwhile; returns the Job as written.
async fn hold(jobs: &Api<Job>, job: &Job, cluster: &str) -> Result<Job, kube::Error> {
    let mut finalizers = job.finalizers().to_vec();
    if !finalizers.iter().any(|f| f == REMOTE_CLEANUP_FINALIZER) {
        finalizers.push(REMOTE_CLEANUP_FINALIZER.into());
    }
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": job.resource_version(),
            "finalizers": finalizers,
            "annotations": {CLUSTER_KEY: assigned_cluster(job).unwrap_or(cluster)},
        }
    });
    let held = jobs
        .patch(
            &job.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    info!(%cluster, "holding the Job for its mirror");
    Ok(held)
}

/// Marks a Job that cannot be dispatched any more (its pinned cluster is
/// Lost): `retention.afterDeactivated` counts from now.
async fn deactivate(jobs: &Api<Job>, job: &Job, why: &str) -> Result<(), kube::Error> {
    let now = Timestamp::now().to_string();
    let patch = serde_json::json!({"metadata": {"annotations": {DEACTIVATED_ANNOTATION: now}}});
    jobs.patch(
        &job.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    info!("deactivated: {why}");
    Ok(())
}

/// Removes the finalizer by index, with a test so a concurrent change fails
/// the patch instead of removing the wrong entry.
async fn remove_finalizer(jobs: &Api<Job>, job: &Job) -> Result<(), kube::Error> {
    let Some(index) = job
        .finalizers()
        .iter()
        .position(|f| f == REMOTE_CLEANUP_FINALIZER)
    else {
        return Ok(());
    };
    let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": REMOTE_CLEANUP_FINALIZER},
        {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
    ]))
    .expect("static JSON patch");
    match jobs
        .patch(
            &job.name_any(),
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

pub fn error_policy(_job: Arc<Job>, error: &Error, _ctx: Arc<Context>) -> Action {
    warn!(%error, "reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}
