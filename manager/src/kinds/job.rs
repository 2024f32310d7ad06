//! `batch/v1` Job, the first kind the manager relays.

use std::collections::BTreeMap;

use jobrelay_kinds::room::PodGroup;
use jobrelay_proto::kinds::{JOB, KindName};
use jobrelay_proto::wire::ends_job;
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;
use serde_json::Value;

use super::carried::{Carried, Counting};
use super::{MirrorError, PodCounts, RelayedKind, job_status, mirror_metadata, without_own_keys};

/// Pod-template labels the manager cluster's API server derived from the
/// manager Job's UID; the worker's API server sets its own.
const CONTROLLER_LABELS: [&str; 4] = [
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
];

impl RelayedKind for Job {
    const NAME: KindName = JOB;

    fn managed_by(&self) -> Option<&str> {
        self.spec.as_ref().and_then(|s| s.managed_by.as_deref())
    }

    fn suspended(&self) -> bool {
        self.spec.as_ref().and_then(|s| s.suspend) == Some(true)
    }

    fn is_finished(&self) -> bool {
        jobrelay_kinds::job::finished(self)
    }

    fn finished_at(&self) -> Option<Timestamp> {
        self.status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .filter(|c| ends_job(&c.type_, &c.status))
            .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0))
            .max()
    }

    /// Without field ownership, the pod template or the selector (never
    /// mirrored). At 10,000 Jobs the templates were most of the manager's
    /// memory.
    fn for_cache(&mut self) {
        jobrelay_process::cache::trim(self);
        if let Some(spec) = self.spec.as_mut() {
            spec.template = Default::default();
            spec.selector = None;
        }
    }

    fn is_whole(&self) -> bool {
        self.spec
            .as_ref()
            .is_some_and(|s| s.template.spec.is_some())
    }

    fn pod_groups(&self) -> Vec<PodGroup> {
        jobrelay_kinds::room::demand::of_job(self)
    }

    type Status = JobStatus;

    fn copied(worker_status: &[u8]) -> serde_json::Result<JobStatus> {
        job_status::copied(worker_status)
    }

    fn finish_time(copied: &JobStatus) -> Option<Timestamp> {
        job_status::newly_finished_at(None, copied)
    }

    fn runs_pods(status: &JobStatus) -> bool {
        job_status::runs_pods(status)
    }

    fn pods_counted(status: &JobStatus) -> Option<PodCounts> {
        let count = |n: Option<i32>| u32::try_from(n.unwrap_or(0)).unwrap_or(0);
        Some(PodCounts {
            active: count(status.active),
            ready: count(status.ready),
            ended: count(status.succeeded).saturating_add(count(status.failed)),
        })
    }

    fn shown(&self) -> JobStatus {
        job_status::shown(self.status.as_ref())
    }

    /// The copied status, reconciled with what the Job shows (see
    /// [`job_status::reconciled`]).
    fn status_patch(&self, copied: &JobStatus) -> Option<Value> {
        let counting = Counting::of(self);
        let desired =
            job_status::reconciled(self.status.as_ref(), copied, self.suspended(), counting);
        job_status::differs(self.status.as_ref(), &desired)
            .then(|| job_status::patch_body(&desired))
    }

    fn after_suspension(last: &JobStatus) -> JobStatus {
        job_status::after_suspension(last)
    }

    fn failed(shown: &JobStatus, reason: &str, message: &str, now: Timestamp) -> JobStatus {
        job_status::failed(shown, reason, message, now)
    }

    fn carried(&self) -> Option<String> {
        Carried::at_placement(self).map(|carried| carried.value())
    }

    fn mirror(&self, origin: &str) -> Result<Job, MirrorError> {
        mirror_job(self, origin)
    }
}

/// The Job to apply on the worker: same namespace and name, the origin labels
/// on the Job and its pod template, and nothing that must not cross clusters
/// (owner references, UID, resource version, managed fields, status, selector,
/// controller labels, `managedBy`, `ttlSecondsAfterFinished`). `suspend`
/// follows the manager Job's, so a suspended Job's mirror runs no Pods. A
/// Job placed again asks its mirror only for what is left (see
/// [`Carried`]).
fn mirror_job(job: &Job, origin: &str) -> Result<Job, MirrorError> {
    let (metadata, origin_labels) = mirror_metadata(job, origin)?;
    let mut spec = job.spec.clone().ok_or(MirrorError::Missing {
        kind: "Job",
        field: "spec",
    })?;
    let carried = Carried::of(job).map_err(|why| MirrorError::Invalid { kind: "Job", why })?;
    if let Some(carried) = carried {
        carried.leave_to(&mut spec);
    }
    spec.selector = None;
    spec.manual_selector = None;
    spec.managed_by = None;
    spec.ttl_seconds_after_finished = None;
    let template_meta = spec
        .template
        .metadata
        .get_or_insert_with(ObjectMeta::default);
    without_own_keys(template_meta);
    let template_labels: &mut BTreeMap<String, String> =
        template_meta.labels.get_or_insert_with(BTreeMap::new);
    for key in CONTROLLER_LABELS {
        template_labels.remove(key);
    }
    template_labels.extend(origin_labels);
    Ok(Job {
        metadata,
        spec: Some(spec),
        status: None,
    })
}

#[cfg(test)]
#[path = "job_tests.rs"]
mod tests;
