//! What the manager reads of its own Job: whether jobrelay relays it, where
//! it stands (active, suspended, finished, being deleted), its finalizer, its
//! revision, and what the Job cache keeps of it.

use jobrelay_proto::wire::{MANAGED_BY, ends_job};
use k8s_openapi::api::batch::v1::Job;

/// Where a manager Job stands, as far as its mirror is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Should run on a worker.
    Active,
    /// Suspended: its mirror, if it has one, is kept suspended (no Pods).
    Suspended,
    /// Complete or Failed: the mirror goes once its retention ran out.
    Finished,
    /// Being deleted: the mirror goes, then the finalizer.
    Deleting,
}

/// Is this Job one jobrelay mirrors?
pub fn is_relayed(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.managed_by.as_deref()) == Some(MANAGED_BY)
}

pub fn lifecycle(job: &Job) -> Lifecycle {
    if job.metadata.deletion_timestamp.is_some() {
        Lifecycle::Deleting
    } else if is_finished(job) {
        Lifecycle::Finished
    } else if job.spec.as_ref().and_then(|s| s.suspend) == Some(true) {
        Lifecycle::Suspended
    } else {
        Lifecycle::Active
    }
}

/// Held by jobrelay's remote-cleanup finalizer.
pub fn has_finalizer(job: &Job) -> bool {
    job.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == jobrelay_proto::wire::REMOTE_CLEANUP_FINALIZER)
}

/// Complete or Failed.
pub fn is_finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| ends_job(&c.type_, &c.status))
}

/// What the manager's Job cache keeps of a Job: what its readers use, without
/// field ownership, the pod template (read from the API server when a mirror
/// is sent, see [`is_whole`]) or the selector (never mirrored). At 10,000
/// Jobs the templates were most of the manager's memory.
pub fn for_cache(job: &mut Job) {
    jobrelay_process::cache::trim(job);
    if let Some(spec) = job.spec.as_mut() {
        spec.template = Default::default();
        spec.selector = None;
    }
}

/// Whether `job` holds its pod template, as every Job the API server returns
/// does; a cached copy does not.
pub fn is_whole(job: &Job) -> bool {
    job.spec.as_ref().is_some_and(|s| s.template.spec.is_some())
}

/// The revision a mirror is applied from: the manager Job's generation, which
/// the API server bumps on every spec change.
pub fn revision(job: &Job) -> u64 {
    job.metadata.generation.unwrap_or(0).max(0) as u64
}
