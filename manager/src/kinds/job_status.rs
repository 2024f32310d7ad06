//! Copying a worker Job's status onto its manager Job (the status part of
//! [`RelayedKind`](super::RelayedKind) for `batch/v1` Job). The copy is a
//! [`JobStatus`] holding only the fields below; the manager Job's status is
//! written with a merge patch that names every one of them, a dropped one as
//! null, so a field the worker dropped is dropped on the manager too, and no
//! other field is touched.

use jobrelay_proto::wire::ends_job;
use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::carried::Counting;

/// The JobStatus fields that mirror what happens on the worker. The worker's
/// condition order is kept (`SuccessCriteriaMet` before `Complete`,
/// `FailureTarget` before `Failed`), as the API server requires.
/// `uncountedTerminatedPods` is the worker Job controller's bookkeeping and
/// stays there.
const COPIED: [&str; 10] = [
    "conditions",
    "startTime",
    "completionTime",
    "active",
    "ready",
    "succeeded",
    "failed",
    "terminating",
    "completedIndexes",
    "failedIndexes",
];

/// The copied part of a worker JobStatus (its JSON, as the agent sent it).
pub fn copied(worker_status: &[u8]) -> serde_json::Result<JobStatus> {
    let status: JobStatus = serde_json::from_slice(worker_status)?;
    Ok(pick(&status))
}

/// The status to write, given the manager Job's current one: the mirror's
/// counts plus what earlier mirrors counted (`counting`, see
/// [`super::carried`]). The API server refuses to let `succeeded` (but for
/// an Indexed Job as wide as its completions) or `failed` decrease or
/// `startTime` change on a running Job, so neither count falls below what
/// the manager Job shows, and its start time stays.
///
/// A `suspended` manager Job shows no `startTime` (as Kubernetes' own Job
/// controller leaves it, so whoever suspended it may change its pod template
/// — Kueue does on eviction) and counts the worker's terminating Pods as
/// active: `active` reaches 0 only once every Pod on the worker is gone, and
/// Kueue releases an evicted Workload's quota only then.
pub fn reconciled(
    current: Option<&JobStatus>,
    desired: &JobStatus,
    suspended: bool,
    counting: Counting,
) -> JobStatus {
    let mut status = desired.clone();
    counting.carried.add_to(&mut status);
    // A finished Job needs a start time, suspended or not.
    if suspended && !finished(desired) {
        status.start_time = None;
        let remaining = status.active.unwrap_or(0) + status.terminating.unwrap_or(0);
        if remaining > 0 {
            status.active = Some(remaining);
        }
    }
    let Some(current) = current else {
        return status;
    };
    if !suspended && current.start_time.is_some() {
        status.start_time.clone_from(&current.start_time);
    }
    let succeeded_floor = (!counting.succeeded_may_fall).then_some(current.succeeded);
    for (reported, shown) in [
        (&mut status.succeeded, succeeded_floor.flatten()),
        (&mut status.failed, current.failed),
    ] {
        let shown = shown.unwrap_or(0);
        if shown > reported.unwrap_or(0) {
            *reported = Some(shown);
        }
    }
    status
}

/// The copied part of a status whose mirror was removed by suspension:
/// nothing runs any more, the counts of what ran stay.
pub fn after_suspension(last: &JobStatus) -> JobStatus {
    JobStatus {
        active: Some(0),
        ready: Some(0),
        terminating: Some(0),
        ..last.clone()
    }
}

/// The copied part of the status the manager Job shows now.
pub fn shown(current: Option<&JobStatus>) -> JobStatus {
    current.map(pick).unwrap_or_default()
}

/// Whether the status counts Pods running.
pub fn runs_pods(status: &JobStatus) -> bool {
    status.active.is_some_and(|n| n > 0)
}

/// The status that ends a Job `Failed` for `reason` (no mirror runs any
/// more), as the API server accepts it for a Job of another manager:
/// `FailureTarget` before `Failed`, no active, ready or terminating Pods, a
/// `startTime` (now, if it never started), no `completionTime`.
pub fn failed(shown: &JobStatus, reason: &str, message: &str, now: Timestamp) -> JobStatus {
    let mut status = after_suspension(shown);
    status.completion_time = None;
    status.start_time.get_or_insert(Time(now));
    let mut conditions: Vec<JobCondition> = status
        .conditions
        .take()
        .into_iter()
        .flatten()
        .filter(|c| {
            !matches!(
                c.type_.as_str(),
                "FailureTarget" | "Failed" | "SuccessCriteriaMet" | "Complete"
            )
        })
        .collect();
    for type_ in ["FailureTarget", "Failed"] {
        conditions.push(JobCondition {
            type_: type_.into(),
            status: "True".into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_probe_time: Some(Time(now)),
            last_transition_time: Some(Time(now)),
        });
    }
    status.conditions = Some(conditions);
    status
}

/// Whether `status` shows `Complete` or `Failed`.
fn finished(status: &JobStatus) -> bool {
    status.conditions.iter().flatten().any(terminal)
}

/// A `Complete` or `Failed` condition that is true.
fn terminal(condition: &JobCondition) -> bool {
    ends_job(&condition.type_, &condition.status)
}

/// When the worker's Job finished, if `desired` shows it finished and the
/// manager Job does not yet (the moment a finish first reaches the manager).
pub fn newly_finished_at(current: Option<&JobStatus>, desired: &JobStatus) -> Option<Timestamp> {
    if current.is_some_and(finished) {
        return None;
    }
    desired
        .conditions
        .iter()
        .flatten()
        .find(|c| terminal(c))?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// Whether the manager Job's status differs from `desired` in a copied field.
pub fn differs(current: Option<&JobStatus>, desired: &JobStatus) -> bool {
    normalized(shown(current)) != normalized(desired.clone())
}

/// The merge patch for the status subresource that makes the copied fields
/// `status`: each copied field it lacks is removed (null), whatever the
/// manager's cache shows, so a write that cache has not seen yet is undone
/// too. A merge patch costs the API server less than a server-side apply of
/// the same fields (no applied configuration to convert and merge).
pub fn patch_body(status: &JobStatus) -> Value {
    super::patch_naming(&COPIED, status)
}

/// The copied fields of `status`, the others left out.
fn pick(status: &JobStatus) -> JobStatus {
    JobStatus {
        conditions: status.conditions.clone(),
        start_time: status.start_time.clone(),
        completion_time: status.completion_time.clone(),
        active: status.active,
        ready: status.ready,
        succeeded: status.succeeded,
        failed: status.failed,
        terminating: status.terminating,
        completed_indexes: status.completed_indexes.clone(),
        failed_indexes: status.failed_indexes.clone(),
        uncounted_terminated_pods: None,
    }
}

/// Zero counts and absent counts mean the same to the API server.
fn normalized(mut status: JobStatus) -> JobStatus {
    for count in [
        &mut status.active,
        &mut status.ready,
        &mut status.succeeded,
        &mut status.failed,
        &mut status.terminating,
    ] {
        if *count == Some(0) {
            *count = None;
        }
    }
    status
}

#[cfg(test)]
#[path = "job_status_tests.rs"]
mod tests;
