//! What earlier mirrors of a Job ran, carried to the next one — as a
//! suspended Job that Kubernetes resumes keeps its succeeded Pods and runs
//! only the completions left.
//!
//! The Job status API lets neither `succeeded` nor `failed` fall on a Job of
//! another manager (`succeeded` may fall only for an Indexed Job whose
//! `completions` equal its `parallelism`). So where a Job is placed again
//! (after Kueue's preemption, a loss, a move), the counts it shows are
//! recorded with the placement ([`CARRIED_ANNOTATION`]), its new mirror is
//! asked only for what is left (fewer `completions`, `parallelism` no more
//! than those, a `backoffLimit` less the failures already counted), and
//! what the Job shows from then on is the record plus what the new mirror
//! reports. `active`, `ready` and `terminating` are the new mirror's own.
//! Kueue's `PodsReady` and reclaimable Pods, read from those counts, then
//! match what runs.
//!
//! An Indexed Job carries nothing: its mirror cannot be told which indexes
//! are done. With `completions` equal to `parallelism` its counts are the
//! new mirror's, as the API allows; otherwise they never fall.

use k8s_openapi::api::batch::v1::{Job, JobSpec, JobStatus};

/// Annotation on a manager Job placed again: what its earlier mirrors
/// counted, `succeeded=S,failed=F`. Written with the placement, read when
/// the mirror is made and its status copied.
pub const CARRIED_ANNOTATION: &str = "jobrelay.dev/carried";

/// The backoff limit of a Job that names none.
const DEFAULT_BACKOFF_LIMIT: i32 = 6;

/// Pods that earlier mirrors of a Job ran to the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Carried {
    pub succeeded: i32,
    pub failed: i32,
}

impl Carried {
    /// What a Job about to be placed carries: the counts it shows now,
    /// where its mirror can run only what is left (not Indexed; succeeded
    /// only where `completions` are set and not yet reached). `None`:
    /// nothing to carry.
    pub fn at_placement(job: &Job) -> Option<Carried> {
        let spec = job.spec.as_ref()?;
        if indexed(spec) {
            return None;
        }
        let status = job.status.as_ref()?;
        let succeeded = match spec.completions {
            Some(completions) if completions > 0 => {
                status.succeeded.unwrap_or(0).clamp(0, completions - 1)
            }
            _ => 0,
        };
        let carried = Carried {
            succeeded,
            failed: status.failed.unwrap_or(0).max(0),
        };
        (carried != Carried::default()).then_some(carried)
    }

    /// The annotation's value.
    pub fn value(&self) -> String {
        format!("succeeded={},failed={}", self.succeeded, self.failed)
    }

    /// The record on `job`, if it has one. An unreadable one is an error
    /// that names the annotation and what is wrong with it.
    pub fn of(job: &Job) -> Result<Option<Carried>, String> {
        let Some(value) = job
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CARRIED_ANNOTATION))
        else {
            return Ok(None);
        };
        parse(value)
            .map(Some)
            .map_err(|why| format!("annotation {CARRIED_ANNOTATION} {value:?}: {why}"))
    }

    /// Asks the mirror's `spec` only for what is left: completions less
    /// those that succeeded, parallelism no more than that, a backoff limit
    /// less the failures counted (never below zero).
    pub fn leave_to(&self, spec: &mut JobSpec) {
        if let Some(completions) = spec.completions.as_mut() {
            *completions = (*completions - self.succeeded).max(1);
            let left = *completions;
            if let Some(parallelism) = spec.parallelism.as_mut() {
                *parallelism = (*parallelism).min(left);
            }
        }
        if self.failed > 0 {
            let limit = spec.backoff_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT);
            spec.backoff_limit = Some((limit - self.failed).max(0));
        }
    }

    /// `reported` (the mirror's counts) as the Job shows them: plus what
    /// earlier mirrors counted.
    pub fn add_to(&self, reported: &mut JobStatus) {
        for (count, carried) in [
            (&mut reported.succeeded, self.succeeded),
            (&mut reported.failed, self.failed),
        ] {
            if carried > 0 {
                *count = Some(count.unwrap_or(0) + carried);
            }
        }
    }
}

/// How a Job shows its mirror's counts: plus what earlier mirrors counted,
/// and whether `succeeded` may fall below what it shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counting {
    pub carried: Carried,
    pub succeeded_may_fall: bool,
}

impl Counting {
    /// How `job` shows its counts. An unreadable record carries nothing
    /// (the counts then never fall; its mirror was refused already).
    pub fn of(job: &Job) -> Counting {
        Counting {
            carried: Carried::of(job).ok().flatten().unwrap_or_default(),
            succeeded_may_fall: succeeded_may_fall(job),
        }
    }
}

/// Whether a Job's `succeeded` may fall: an Indexed Job whose completions
/// equal its parallelism (the API allows it, as such a Job may be scaled
/// down).
pub fn succeeded_may_fall(job: &Job) -> bool {
    job.spec
        .as_ref()
        .is_some_and(|spec| indexed(spec) && spec.completions == spec.parallelism)
}

fn indexed(spec: &JobSpec) -> bool {
    spec.completion_mode.as_deref() == Some("Indexed")
}

fn parse(value: &str) -> Result<Carried, String> {
    let mut carried = Carried::default();
    for part in value.split(',') {
        let (key, count) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?} is not key=count"))?;
        let count: i32 = count
            .trim()
            .parse()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| format!("{key} is not a count"))?;
        match key.trim() {
            "succeeded" => carried.succeeded = count,
            "failed" => carried.failed = count,
            other => return Err(format!("{other:?} is not succeeded or failed")),
        }
    }
    Ok(carried)
}

#[cfg(test)]
#[path = "carried_tests.rs"]
mod tests;
