//! Writing one mirror to the worker: create the Job the manager sent, or
//! update this origin's mirror to its newer revision, never touching a
//! same-named Job that is not this origin's.

use jobrelay_proto::v1::{ApplyMirror, RejectReason};
use jobrelay_proto::wire::{
    MANAGER_INSTANCE_LABEL, ORIGIN_LABEL, ORIGIN_UID_LABEL, QUEUE_NAME_LABEL, REVISION_ANNOTATION,
    ends_job,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tracing::{debug, info};

use super::FIELD_MANAGER;
use crate::namespaces::{NamespacePolicy, Verdict};
use crate::report::{ApplyFailure, apply_failure, revision_of};

/// Creates the mirror `apply` carries, or updates this origin's one to its
/// revision, labelled with the manager `instance` of the session.
pub(super) async fn try_apply(
    client: &kube::Client,
    (origin, instance): (&str, &str),
    policy: &NamespacePolicy,
    apply: &ApplyMirror,
) -> Result<(), ApplyFailure> {
    let mut job = read_mirror(origin, instance, apply)?;
    let (Some(namespace), name) = (job.namespace(), job.name_any()) else {
        return refused(RejectReason::Invalid, "the Job has no namespace".into());
    };
    admitted(client, policy, &namespace).await?;
    let api: Api<Job> = Api::namespaced(client.clone(), &namespace);
    let Some(existing) = create_or_find(&api, &job).await? else {
        info!(uid = %apply.origin_uid, %namespace, %name, revision = apply.revision, "mirror created");
        return Ok(());
    };
    ours_to_update(&existing, origin, apply)?;
    if revision_of(&existing) >= apply.revision {
        return Ok(());
    }
    if finished(&existing) {
        // Its spec is left as it ran: the worker's Job controller no
        // longer acts on it, and a finished Job refuses what a suspension
        // writes (its start time). The revision is recorded, so the
        // manager knows the worker holds it, and the outcome stands.
        let annotations = serde_json::json!({
            "metadata": {"annotations": {REVISION_ANNOTATION: apply.revision.to_string()}}
        });
        api.patch(&name, &merge_params(), &Patch::Merge(&annotations))
            .await
            .map_err(|e| apply_failure(&e))?;
        info!(uid = %apply.origin_uid, %namespace, %name, revision = apply.revision, "mirror already finished; revision recorded, its spec left as it ran");
        return Ok(());
    }
    let queued_here = keep_what_the_workers_kueue_owns(&mut job, &existing);
    if !queued_here {
        prepare(&api, &name, before_update(&existing, &job)).await?;
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(&job))
        .await
        .map_err(|e| apply_failure(&e))?;
    info!(uid = %apply.origin_uid, %namespace, %name, revision = apply.revision, "mirror updated");
    Ok(())
}

fn refused<T>(reason: RejectReason, message: String) -> Result<T, ApplyFailure> {
    Err(ApplyFailure::Refused(reason, message))
}

/// Merge patches recorded under the agent's field manager.
fn merge_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}

/// The Job `apply` carries, if it is this origin's mirror of the Job it
/// names, labelled with the manager `instance` of the session.
fn read_mirror(origin: &str, instance: &str, apply: &ApplyMirror) -> Result<Job, ApplyFailure> {
    let mut job: Job = match serde_json::from_slice(&apply.job) {
        Ok(job) => job,
        Err(e) => return refused(RejectReason::Invalid, format!("unreadable Job: {e}")),
    };
    let labels = job.metadata.labels.clone().unwrap_or_default();
    if labels.get(ORIGIN_LABEL).map(String::as_str) != Some(origin)
        || labels.get(ORIGIN_UID_LABEL) != Some(&apply.origin_uid)
    {
        return refused(
            RejectReason::Invalid,
            format!(
                "the Job does not carry {ORIGIN_LABEL}={} and {ORIGIN_UID_LABEL}={}",
                origin, apply.origin_uid
            ),
        );
    }
    if !instance.is_empty() {
        job.labels_mut()
            .insert(MANAGER_INSTANCE_LABEL.into(), instance.into());
    }
    Ok(job)
}

/// Creates `job`; `None` once created, else the Job of that name already
/// on the worker.
async fn create_or_find(api: &Api<Job>, job: &Job) -> Result<Option<Job>, ApplyFailure> {
    let create = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    match api.create(&create, job).await {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(s)) if s.is_already_exists() => {
            match api.get_opt(&job.name_any()).await {
                Ok(Some(existing)) => Ok(Some(existing)),
                Ok(None) => Err(ApplyFailure::Wait(
                    "the existing Job vanished; trying again".into(),
                )),
                Err(e) => Err(apply_failure(&e)),
            }
        }
        Err(e) => Err(apply_failure(&e)),
    }
}

/// Whether `existing` is this origin's mirror of the same manager Job, not
/// being deleted: never another's Job, never an older mirror's.
fn ours_to_update(existing: &Job, origin: &str, apply: &ApplyMirror) -> Result<(), ApplyFailure> {
    let (namespace, name) = (
        existing.namespace().unwrap_or_default(),
        existing.name_any(),
    );
    let existing_labels = existing.metadata.labels.clone().unwrap_or_default();
    if existing_labels.get(ORIGIN_LABEL).map(String::as_str) != Some(origin) {
        return refused(
            RejectReason::Conflict,
            format!(
                "Job {namespace}/{name} already exists on this cluster and was not created by jobrelay for origin {} (no matching {ORIGIN_LABEL} label); it is left untouched",
                origin
            ),
        );
    }
    if existing_labels.get(ORIGIN_UID_LABEL) != Some(&apply.origin_uid)
        || existing.metadata.deletion_timestamp.is_some()
    {
        return Err(ApplyFailure::Wait(format!(
            "an older mirror of {namespace}/{name} is still being deleted"
        )));
    }
    Ok(())
}

/// Writes what must come before a new revision of a running mirror.
async fn prepare(api: &Api<Job>, name: &str, steps: Vec<Prepare>) -> Result<(), ApplyFailure> {
    for step in steps {
        let (patch, status) = match step {
            Prepare::Suspend => (serde_json::json!({"spec": {"suspend": true}}), false),
            Prepare::ClearStartTime => (serde_json::json!({"status": {"startTime": null}}), true),
        };
        let params = merge_params();
        let patched = match status {
            false => api.patch(name, &params, &Patch::Merge(&patch)).await,
            true => api.patch_status(name, &params, &Patch::Merge(&patch)).await,
        };
        patched.map_err(|e| apply_failure(&e))?;
        debug!(%name, ?step, "mirror prepared for a suspended revision");
    }
    Ok(())
}

/// A write that must come before a new revision is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prepare {
    /// Suspend the mirror first.
    Suspend,
    /// Clear `status.startTime`, which Kubernetes' Job controller keeps on a
    /// suspended Job: only a suspended Job without one may have its pod
    /// template's scheduling (node selector, tolerations, labels) changed —
    /// as Kueue does when it evicts and later admits a Job elsewhere.
    ClearStartTime,
}

/// Whether the mirror finished (`Complete` or `Failed`): nothing applied
/// later changes how it ran. A mirror only on the way to one
/// (`SuccessCriteriaMet`, `FailureTarget`) is not: one whose Pod succeeded
/// as it was suspended (its start time cleared) can complete only once a
/// resume gives it a start time again.
fn finished(existing: &Job) -> bool {
    existing
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| ends_job(&c.type_, &c.status))
}

/// What to write before applying `desired` over `existing`: a mirror being
/// suspended is suspended, then has its start time cleared, so this and any
/// later revision may change its pod template.
fn before_update(existing: &Job, desired: &Job) -> Vec<Prepare> {
    let suspended = |job: &Job| job.spec.as_ref().and_then(|s| s.suspend) == Some(true);
    let started = existing
        .status
        .as_ref()
        .is_some_and(|s| s.start_time.is_some());
    if !suspended(desired) || !started {
        return Vec::new();
    }
    if suspended(existing) {
        vec![Prepare::ClearStartTime]
    } else {
        vec![Prepare::Suspend, Prepare::ClearStartTime]
    }
}

/// A mirror queued in this cluster's own Kueue (it carries a queue name) has
/// its `suspend`, pod template and queue name owned by that Kueue once
/// created: a later revision keeps what the cluster shows for them, so it
/// neither fights Kueue's admission nor touches a started Job's template.
/// True when the mirror is such a one.
fn keep_what_the_workers_kueue_owns(desired: &mut Job, existing: &Job) -> bool {
    let queue = |job: &Job| {
        job.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(QUEUE_NAME_LABEL))
            .cloned()
    };
    if queue(desired).is_none() {
        return false;
    }
    if let Some(existing_queue) = queue(existing) {
        desired
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(QUEUE_NAME_LABEL.into(), existing_queue);
    }
    if let (Some(desired), Some(existing)) = (desired.spec.as_mut(), existing.spec.as_ref()) {
        desired.suspend = existing.suspend;
        desired.template = existing.template.clone();
    }
    true
}

/// Whether the namespace policy lets a mirror into `namespace`, reading the
/// namespace's labels only when its selector must tell.
async fn admitted(
    client: &kube::Client,
    policy: &NamespacePolicy,
    namespace: &str,
) -> Result<(), ApplyFailure> {
    let verdict = match policy.decide(namespace, None) {
        Verdict::NeedsLabels => match Api::<Namespace>::all(client.clone())
            .get_opt(namespace)
            .await
        {
            Ok(Some(found)) => policy.decide(namespace, Some(found.labels())),
            Ok(None) => {
                return Err(ApplyFailure::Refused(
                    RejectReason::NamespaceMissing,
                    format!("namespace {namespace} does not exist on the worker"),
                ));
            }
            Err(error) => return Err(apply_failure(&error)),
        },
        verdict => verdict,
    };
    match verdict {
        Verdict::Allowed => Ok(()),
        Verdict::Refused(message) => Err(ApplyFailure::Refused(
            RejectReason::NamespaceNotAllowed,
            message,
        )),
        Verdict::NeedsLabels => Err(ApplyFailure::Refused(
            RejectReason::NamespaceNotAllowed,
            format!("namespace {namespace}: its labels could not be read"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(suspend: bool, started: bool) -> Job {
        let mut job: Job = serde_json::from_value(serde_json::json!({
            "spec": {"suspend": suspend, "template": {}},
        }))
        .unwrap();
        if started {
            job.status = Some(
                serde_json::from_value(serde_json::json!({"startTime": "2026-11-24T10:00:00Z"}))
                    .unwrap(),
            );
        }
        job
    }

    #[test]
    fn a_started_mirror_is_suspended_and_its_start_time_cleared_before_a_suspended_revision() {
        assert_eq!(
            before_update(&job(false, true), &job(true, false)),
            [Prepare::Suspend, Prepare::ClearStartTime]
        );
        assert_eq!(
            before_update(&job(true, true), &job(true, false)),
            [Prepare::ClearStartTime],
            "suspended by an earlier revision, start time still set"
        );
    }

    #[test]
    fn a_mirror_queued_in_the_workers_kueue_keeps_what_that_kueue_owns() {
        let labelled = |mut job: Job, queue: &str| {
            job.metadata.labels = Some([(QUEUE_NAME_LABEL.to_string(), queue.to_string())].into());
            job
        };
        let mut existing = labelled(job(false, true), "batch");
        existing.spec.as_mut().unwrap().template.spec = Some(
            serde_json::from_value(serde_json::json!({
                "containers": [], "nodeSelector": {"pool": "worker-flavor"},
            }))
            .unwrap(),
        );
        let mut desired = labelled(job(true, false), "batch-renamed");
        desired.spec.as_mut().unwrap().parallelism = Some(3);
        assert!(keep_what_the_workers_kueue_owns(&mut desired, &existing));
        let spec = desired.spec.as_ref().unwrap();
        assert_eq!(
            spec.suspend,
            Some(false),
            "admitted by the worker's Kueue: left so"
        );
        assert_eq!(spec.template, existing.spec.as_ref().unwrap().template);
        assert_eq!(spec.parallelism, Some(3), "the rest is applied");
        assert_eq!(desired.metadata.labels.unwrap()[QUEUE_NAME_LABEL], "batch");

        let mut unqueued = job(true, false);
        assert!(!keep_what_the_workers_kueue_owns(&mut unqueued, &existing));
        assert_eq!(unqueued.spec.unwrap().suspend, Some(true));
    }

    #[test]
    fn a_finished_mirror_is_left_as_it_ran_and_one_about_to_finish_is_not() {
        let with = |type_: &str, status: &str| {
            let mut job = job(false, true);
            job.status.as_mut().unwrap().conditions = Some(vec![
                serde_json::from_value(serde_json::json!({"type": type_, "status": status}))
                    .unwrap(),
            ]);
            job
        };
        for outcome in ["Complete", "Failed"] {
            assert!(finished(&with(outcome, "True")), "{outcome}");
        }
        for interim in ["SuccessCriteriaMet", "FailureTarget"] {
            assert!(!finished(&with(interim, "True")), "{interim}");
        }
        assert!(!finished(&with("Complete", "False")));
        assert!(!finished(&with("Suspended", "True")));
        assert!(!finished(&job(false, true)), "running");
    }

    #[test]
    fn nothing_comes_first_for_a_running_revision_or_a_mirror_that_never_started() {
        assert!(before_update(&job(false, true), &job(false, false)).is_empty());
        assert!(before_update(&job(true, false), &job(true, false)).is_empty());
        assert!(before_update(&job(true, false), &job(false, false)).is_empty());
    }
}
