//! The manager Job controller: one reconcile per manager Job, triggered by the
//! Job's own changes and by what agents report (through the [`Fleet`]).
//!
//! - Active: hold the finalizer and the chosen cluster (both recorded before
//!   anything is sent), have the mirror applied there, copy its status back.
//! - Suspended: have the mirror deleted; resuming applies it again.
//! - Finished or being deleted: have the mirror deleted and, once the agent
//!   confirmed every Pod gone, release the finalizer.

use std::sync::Arc;
use std::time::Duration;

use jobrelay_proto::v1::{DeleteReason, MirrorPhase};
use jobrelay_proto::wire::{CLUSTER_KEY, REMOTE_CLEANUP_FINALIZER};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tracing::{debug, info, instrument, warn};

use crate::events::{Events, Reason};
use crate::fleet::{Apply, Cleanup, Fleet};
use crate::mirror::{Lifecycle, is_relayed, lifecycle, mirror_job, revision};
use crate::placement::{assigned_cluster, pinned_cluster};
use crate::status;

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
    pub events: Events,
    pub origin: String,
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
        Lifecycle::Active => dispatch(&job, &key, &uid, assigned, &jobs, &ctx)
            .await
            .map_err(kube_err),
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
        Lifecycle::Finished | Lifecycle::Deleting => {
            if !has_finalizer(&job) {
                if let Some(cluster) = &assigned {
                    ctx.fleet.forget(cluster, &uid);
                }
                return Ok(Action::await_change());
            }
            let Some(cluster) = assigned else {
                remove_finalizer(&jobs, &job).await.map_err(kube_err)?;
                return Ok(Action::await_change());
            };
            let reason = if job.meta().deletion_timestamp.is_some() {
                DeleteReason::ManagerJobDeleted
            } else {
                DeleteReason::RetentionExpired
            };
            match ctx.fleet.cleanup(&cluster, &uid, &key, reason) {
                Cleanup::Gone { pods_deleted } => {
                    remove_finalizer(&jobs, &job).await.map_err(kube_err)?;
                    ctx.fleet.forget(&cluster, &uid);
                    let note = format!(
                        "mirror Job and every Pod gone from cluster {cluster} ({pods_deleted} Pods deleted by the agent)"
                    );
                    info!(%cluster, pods_deleted, "remote cleanup confirmed");
                    ctx.events
                        .publish(&job.object_ref(&()), Reason::RemotePodsGone, note)
                        .await;
                    Ok(Action::await_change())
                }
                outcome => Ok(awaiting_cleanup(&ctx, &job, &cluster, outcome).await),
            }
        }
    }
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
    let cluster = match &assigned {
        Some(cluster) => cluster.clone(),
        None => match ctx.fleet.place(uid, key, pinned_cluster(job)) {
            Some(cluster) => cluster,
            None => {
                debug!("no worker cluster connected; waiting");
                return Ok(Action::requeue(AWAIT_CLUSTER));
            }
        },
    };
    if assigned.is_none() || !has_finalizer(job) {
        // Both are recorded before anything is sent; the change triggers the next step.
        hold(jobs, job, &cluster).await?;
        return Ok(Action::await_change());
    }

    let mirror = match mirror_job(job, &ctx.origin) {
        Ok(mirror) => mirror,
        Err(error) => {
            warn!(%error, "cannot mirror");
            return Ok(Action::await_change());
        }
    };
    let revision = revision(job);
    let outcome = ctx.fleet.ensure_applied(&cluster, uid, key, revision, || {
        serde_json::to_vec(&mirror).unwrap_or_default()
    });
    let next = match outcome {
        Apply::Sent => {
            let note = format!("sent to cluster {cluster} (revision {revision})");
            ctx.events
                .publish(&job.object_ref(&()), Reason::Dispatched, note)
                .await;
            Action::requeue(RESYNC)
        }
        Apply::InPlace | Apply::Rejected(..) => Action::requeue(RESYNC),
        Apply::AwaitingGone => Action::requeue(AWAIT_AGENT),
        Apply::Disconnected => Action::requeue(AWAIT_CLUSTER),
    };

    if let Some(view) = ctx.fleet.view(&cluster, uid)
        && view.held_revision.is_some()
        && view.phase != MirrorPhase::Deleting
        && let Some(worker_status) = &view.status
    {
        write_status(jobs, job, worker_status).await?;
    }
    Ok(next)
}

/// Adds the finalizer and records the cluster, in one write that fails if
/// the Job changed meanwhile.
async fn hold(jobs: &Api<Job>, job: &Job, cluster: &str) -> Result<(), kube::Error> {
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
    jobs.patch(
        &job.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    info!(%cluster, "holding the Job for its mirror");
    Ok(())
}

fn has_finalizer(job: &Job) -> bool {
    job.finalizers()
        .iter()
        .any(|f| f == REMOTE_CLEANUP_FINALIZER)
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

async fn write_status(
    jobs: &Api<Job>,
    job: &Job,
    worker: &serde_json::Value,
) -> Result<(), kube::Error> {
    let desired = status::reconciled(job.status.as_ref(), worker);
    if !status::differs(job.status.as_ref(), &desired) {
        return Ok(());
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    jobs.patch_status(
        &job.name_any(),
        &params,
        &Patch::Apply(status::apply_body(&desired)),
    )
    .await?;
    Ok(())
}

pub fn error_policy(_job: Arc<Job>, error: &Error, _ctx: Arc<Context>) -> Action {
    warn!(%error, "reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}
