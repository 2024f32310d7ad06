//! The writes the manager makes to a manager Job: its metadata — each that
//! matters conditional, so a write based on a stale copy fails instead of
//! winning — and the status copied from its mirror.

use std::time::Duration;

use jobrelay_proto::wire::{
    AVOID_UNTIL_ANNOTATION, CLUSTER_KEY, DEACTIVATED_ANNOTATION, FLAVORS_ANNOTATION,
    LAST_LOST_MIRROR_ANNOTATION, MIRRORS_LOST_ANNOTATION, NOT_ADMITTED_BY_ANNOTATION,
    REMOTE_CLEANUP_FINALIZER, WITHDRAWN_FROM_ANNOTATION,
};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, Preconditions, PropagationPolicy};
use tracing::info;

use crate::job::placement::assigned_cluster;
use crate::job::record::{SEAL_ANNOTATION, Sealer};
use crate::kinds::RelayedKind;
use crate::kinds::carried::CARRIED_ANNOTATION;
use crate::kueue::scheduling::FlavorsChange;

/// The resourceVersion a write left the Job at; `None`: nothing was written
/// (it already read so), or the Job is gone.
pub type Written = Option<String>;

/// Adds the finalizer and records the cluster — and, placed under a Kueue
/// reservation, the change to the record of its flavors' constraints — in
/// one write that fails if the Job changed meanwhile; returns the Job as
/// written.
pub async fn hold<K: RelayedKind>(
    jobs: &Api<K>,
    job: &K,
    cluster: &str,
    flavors: Option<FlavorsChange>,
    sealer: &Sealer,
) -> Result<K, kube::Error> {
    let mut finalizers = job.finalizers().to_vec();
    if !finalizers.iter().any(|f| f == REMOTE_CLEANUP_FINALIZER) {
        finalizers.push(REMOTE_CLEANUP_FINALIZER.into());
    }
    let mut annotations = record(job, assigned_cluster(job).or(Some(cluster)), sealer);
    // Placed now, it records what its earlier mirrors counted (or that
    // nothing is carried).
    if assigned_cluster(job).is_none() {
        annotations[CARRIED_ANNOTATION] = job.carried().into();
    }
    if let Some(flavors) = flavors {
        annotations[FLAVORS_ANNOTATION] = serde_json::json!(flavors.value());
    }
    let metadata = serde_json::json!({
        "resourceVersion": job.resource_version(),
        "finalizers": finalizers,
        "annotations": annotations,
    });
    let held = patch_metadata(jobs, job, metadata).await?;
    info!(%cluster, "holding the Job for its mirror");
    Ok(held)
}

/// jobrelay's record of where `job` runs — on `cluster`, or nowhere — as
/// annotations to merge: the cluster and its seal.
fn record<K: RelayedKind>(job: &K, cluster: Option<&str>, sealer: &Sealer) -> serde_json::Value {
    let uid = job.meta().uid.as_deref().unwrap_or_default();
    serde_json::json!({
        CLUSTER_KEY: cluster,
        SEAL_ANNOTATION: cluster.and_then(|cluster| sealer.seal(uid, cluster)),
    })
}

/// Writes jobrelay's record that the Job runs on `placed` (or nowhere)
/// back over what someone else wrote in its place (or seals one an earlier
/// jobrelay wrote), if the Job is still the one read.
pub async fn restore_record<K: RelayedKind>(
    jobs: &Api<K>,
    job: &K,
    placed: Option<&str>,
    sealer: &Sealer,
) -> Result<Written, kube::Error> {
    let metadata = serde_json::json!({
        "resourceVersion": job.resource_version(),
        "annotations": record(job, placed, sealer),
    });
    patch_metadata(jobs, job, metadata)
        .await
        .map(|j| j.resource_version())
}

/// Counts a lost mirror, if the Job is still the one the count was read
/// from, and records what it counted for the mirror run again.
pub async fn count_loss<K: RelayedKind>(
    jobs: &Api<K>,
    job: &K,
    lost: u32,
    mirror_uid: &str,
) -> Result<Written, kube::Error> {
    let metadata = serde_json::json!({
        "resourceVersion": job.resource_version(),
        "annotations": {
            MIRRORS_LOST_ANNOTATION: lost.to_string(),
            LAST_LOST_MIRROR_ANNOTATION: mirror_uid,
            CARRIED_ANNOTATION: job.carried(),
        },
    });
    patch_metadata(jobs, job, metadata)
        .await
        .map(|j| j.resource_version())
}

/// Sets (or, with `None`, removes) one annotation, unless it already reads so.
pub async fn annotate<K: RelayedKind>(
    jobs: &Api<K>,
    job: &K,
    key: &str,
    value: Option<&str>,
) -> Result<Written, kube::Error> {
    if job.annotations().get(key).map(String::as_str) == value {
        return Ok(None);
    }
    let metadata = serde_json::json!({"annotations": {key: value}});
    patch_metadata(jobs, job, metadata)
        .await
        .map(|j| j.resource_version())
}

/// A merge patch of the Job's metadata (conditional when it carries a
/// `resourceVersion`); returns the Job as written.
async fn patch_metadata<K: RelayedKind>(
    jobs: &Api<K>,
    job: &K,
    metadata: serde_json::Value,
) -> Result<K, kube::Error> {
    let patch = serde_json::json!({ "metadata": metadata });
    jobs.patch(
        &job.name_any(),
        &crate::field_manager::patch(),
        &Patch::Merge(&patch),
    )
    .await
}

/// Marks a Job that cannot be dispatched any more (its pinned cluster is
/// Lost): `retention.afterDeactivated` counts from now.
pub async fn deactivate<K: RelayedKind>(
    jobs: &Api<K>,
    job: &K,
    why: &str,
) -> Result<Written, kube::Error> {
    let now = Timestamp::now().to_string();
    let written = annotate(jobs, job, DEACTIVATED_ANNOTATION, Some(&now)).await?;
    info!("deactivated: {why}");
    Ok(written)
}

/// Removes the finalizer by index, with a test so a concurrent change fails
/// the patch instead of removing the wrong entry.
pub async fn remove_finalizer<K: RelayedKind>(
    jobs: &Api<K>,
    job: &K,
) -> Result<Written, kube::Error> {
    patch_without_finalizer(jobs, job, Vec::new()).await
}

/// Drops the Job's cluster and remote-cleanup finalizer (its mirror was
/// withdrawn and nothing of it is left, or its cluster is Lost), and records
/// the cluster it leaves `from`: tried last by the next placement, avoided
/// until `avoid_until`, and added to `not-admitted-by` when its Kueue did
/// not admit the mirror in time.
pub async fn unplace<K: RelayedKind>(
    jobs: &Api<K>,
    job: &K,
    from: &str,
    not_admitted: bool,
    avoid_until: Option<Timestamp>,
) -> Result<Written, kube::Error> {
    let annotation = |key: &str| format!("/metadata/annotations/{}", key.replace('/', "~1"));
    let annotations = job.meta().annotations.as_ref();
    let has = |key: &str| annotations.is_some_and(|a| a.contains_key(key));
    let mut ops = Vec::new();
    if annotations.is_none() {
        ops.push(serde_json::json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
    }
    // Removed whether or not the Job carries them as cached.
    for key in [CLUSTER_KEY, SEAL_ANNOTATION] {
        ops.push(serde_json::json!({"op": "add", "path": annotation(key), "value": ""}));
        ops.push(serde_json::json!({"op": "remove", "path": annotation(key)}));
    }
    // Placed again, it records the flavors it is placed under then.
    if has(FLAVORS_ANNOTATION) {
        ops.push(serde_json::json!({"op": "remove", "path": annotation(FLAVORS_ANNOTATION)}));
    }
    ops.push(serde_json::json!({"op": "add", "path": annotation(WITHDRAWN_FROM_ANNOTATION), "value": from}));
    match avoid_until {
        Some(until) => ops.push(serde_json::json!({"op": "add", "path": annotation(AVOID_UNTIL_ANNOTATION), "value": until.to_string()})),
        None if has(AVOID_UNTIL_ANNOTATION) => {
            ops.push(serde_json::json!({"op": "remove", "path": annotation(AVOID_UNTIL_ANNOTATION)}));
        }
        None => {}
    }
    if not_admitted {
        let value = crate::job::withdrawal::with_not_admitted_by(job, from);
        ops.push(serde_json::json!({"op": "add", "path": annotation(NOT_ADMITTED_BY_ANNOTATION), "value": value}));
    }
    info!(
        from,
        not_admitted,
        ?avoid_until,
        "unplacing the Job: its withdrawn mirror is gone"
    );
    patch_without_finalizer(jobs, job, ops).await
}

/// A JSON patch of `ops` that also removes the remote-cleanup finalizer if
/// the Job holds it (tested at its index, so a concurrent change of the list
/// fails it rather than removing another); a Job gone is no error.
async fn patch_without_finalizer<K: RelayedKind>(
    jobs: &Api<K>,
    job: &K,
    mut ops: Vec<serde_json::Value>,
) -> Result<Written, kube::Error> {
    if let Some(index) = job
        .finalizers()
        .iter()
        .position(|f| f == REMOTE_CLEANUP_FINALIZER)
    {
        ops.push(serde_json::json!({"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": REMOTE_CLEANUP_FINALIZER}));
        ops.push(
            serde_json::json!({"op": "remove", "path": format!("/metadata/finalizers/{index}")}),
        );
    }
    if ops.is_empty() {
        return Ok(None);
    }
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::Value::Array(ops)).expect("JSON patch operations");
    match jobs
        .patch(
            &job.name_any(),
            &crate::field_manager::patch(),
            &Patch::<()>::Json(patch),
        )
        .await
    {
        Ok(written) => Ok(written.resource_version()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

/// Deletes the manager Job itself (its retention ran out), Background, with
/// a UID precondition; returns whether this call deleted it.
pub async fn delete<K: RelayedKind>(
    jobs: &Api<K>,
    job: &K,
    what: &str,
    kept: Duration,
) -> Result<bool, kube::Error> {
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
            info!(after = ?kept, "deleting the manager Job: {what} and its retention ran out");
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes the part of `worker` the manager Job shows, if it shows something
/// else now (a merge patch of the copied fields only).
pub async fn write_status<K: RelayedKind>(
    jobs: &Api<K>,
    job: &K,
    worker: &K::Status,
) -> Result<Written, kube::Error> {
    let Some(patch) = job.status_patch(worker) else {
        return Ok(None);
    };
    let params = crate::field_manager::patch();
    let written = jobs
        .patch_status(&job.name_any(), &params, &Patch::Merge(patch))
        .await?;
    Ok(written.resource_version())
}
