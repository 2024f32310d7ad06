//! Copying what a worker reports onto the manager Job's status.
//!
//! It runs as a controller of its own over the same Job cache and triggers as
//! the one in `reconcile`, so a Job that finished on its worker is shown
//! finished at once, even while a wave of new Jobs queues up for dispatch
//! there. It alone copies the status of an active or suspended Job; the
//! reconcile in `reconcile.rs` writes status only to show a lost or refused
//! mirror.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use jobrelay_proto::v1::MirrorPhase;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tracing::instrument;

use crate::job_life::RESYNC;
use crate::job_writes::Written;
use crate::mirror::{Lifecycle, has_finalizer, is_relayed, lifecycle};
use crate::placement::assigned_cluster;
use crate::reconcile::{Context, Error, FIELD_MANAGER};
use crate::retention::deactivated_at;
use crate::status;

#[instrument(skip_all, fields(job = %ObjectRef::from_obj(job.as_ref())))]
pub async fn reconcile(job: Arc<Job>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !is_relayed(&job)
        || !matches!(lifecycle(&job), Lifecycle::Active | Lifecycle::Suspended)
        || !has_finalizer(&job)
        || deactivated_at(&job).is_some()
    {
        return Ok(Action::await_change());
    }
    let (Some(cluster), Some(uid), Some(namespace)) =
        (assigned_cluster(&job), job.uid(), job.namespace())
    else {
        return Ok(Action::await_change());
    };
    let Some(view) = ctx.fleet.view(cluster, &uid) else {
        return Ok(Action::requeue(RESYNC));
    };
    // A mirror being deleted says nothing more about this Job's run.
    if view.held_revision.is_some()
        && view.phase != MirrorPhase::Deleting
        && let Some(worker_status) = &view.status
    {
        let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &namespace);
        let finished_at = status::newly_finished_at(job.status.as_ref(), worker_status);
        write_status(&jobs, &job, worker_status)
            .await
            .map_err(|source| Error::Kube {
                job: ObjectRef::from_obj(job.as_ref()).to_string(),
                source,
            })?;
        if let Some(at) = finished_at {
            let took = Timestamp::now().duration_since(at);
            ctx.metrics
                .status_shown(cluster, Duration::try_from(took).unwrap_or_default());
        }
    }
    Ok(Action::requeue(RESYNC))
}

/// Writes the part of `worker` the manager Job shows, if it shows something
/// else now (server-side apply, so only these fields are owned).
pub async fn write_status(
    jobs: &Api<Job>,
    job: &Job,
    worker: &serde_json::Value,
) -> Result<Written, kube::Error> {
    let suspended = lifecycle(job) == Lifecycle::Suspended;
    let desired = status::reconciled(job.status.as_ref(), worker, suspended);
    if !status::differs(job.status.as_ref(), &desired) {
        return Ok(None);
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let written = jobs
        .patch_status(
            &job.name_any(),
            &params,
            &Patch::Apply(status::apply_body(&desired)),
        )
        .await?;
    Ok(written.resource_version())
}
