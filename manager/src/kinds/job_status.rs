//! Copying a worker Job's status onto its manager Job (the status part of
//! [`RelayedKind`](super::RelayedKind) for `batch/v1` Job). The manager Job's
//! status is written with a merge patch that names every field copied here,
//! a dropped one as null, so a field the worker dropped is dropped on the
//! manager too, and no other field is touched.

use jobrelay_proto::wire::ends_job;
use k8s_openapi::api::batch::v1::JobStatus;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value};

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
pub fn copied(worker_status: &[u8]) -> Result<Value, serde_json::Error> {
    let status: Value = serde_json::from_slice(worker_status)?;
    Ok(pick(&status))
}

/// The status to write, given the manager Job's current one: the API server
/// refuses to let `succeeded` or `failed` decrease or `startTime` change on a
/// running Job, so a mirror that started over (after a loss) keeps the counts
/// and start time the manager Job already shows.
///
/// A `suspended` manager Job shows no `startTime` (as Kubernetes' own Job
/// controller leaves it, so whoever suspended it may change its pod template
/// — Kueue does on eviction) and counts the worker's terminating Pods as
/// active: `active` reaches 0 only once every Pod on the worker is gone, and
/// Kueue releases an evicted Workload's quota only then.
pub fn reconciled(current: Option<&JobStatus>, desired: &Value, suspended: bool) -> Value {
    let mut status = desired.as_object().cloned().unwrap_or_default();
    // A finished Job needs a start time, suspended or not.
    if suspended && !finished(desired) {
        status.remove("startTime");
        let count = |field: &str| status.get(field).and_then(Value::as_i64).unwrap_or(0);
        let remaining = count("active") + count("terminating");
        if remaining > 0 {
            status.insert("active".into(), Value::from(remaining));
        }
    }
    let Some(current) = current else {
        return Value::Object(status);
    };
    if !suspended
        && let Some(start) = &current.start_time
        && let Ok(start) = serde_json::to_value(start)
    {
        status.insert("startTime".into(), start);
    }
    for (field, shown) in [("succeeded", current.succeeded), ("failed", current.failed)] {
        let reported = status.get(field).and_then(Value::as_i64).unwrap_or(0);
        let shown = i64::from(shown.unwrap_or(0));
        if shown > reported {
            status.insert(field.into(), Value::from(shown));
        }
    }
    Value::Object(status)
}

/// The copied part of a status whose mirror was removed by suspension:
/// nothing runs any more, the counts of what ran stay.
pub fn after_suspension(last: &Value) -> Value {
    let mut status = last.as_object().cloned().unwrap_or_default();
    for field in ["active", "ready", "terminating"] {
        status.insert(field.into(), Value::from(0));
    }
    Value::Object(status)
}

/// The copied part of the status the manager Job shows now.
pub fn shown(current: Option<&JobStatus>) -> Value {
    current
        .and_then(|s| serde_json::to_value(s).ok())
        .map_or_else(|| Value::Object(Map::new()), |s| pick(&s))
}

/// The status that ends a Job `Failed` for `reason` (no mirror runs any
/// more), as the API server accepts it for a Job of another manager:
/// `FailureTarget` before `Failed`, no active, ready or terminating Pods, a
/// `startTime` (now, if it never started), no `completionTime`.
pub fn failed(shown: &Value, reason: &str, message: &str, now: &str) -> Value {
    let mut status = after_suspension(shown)
        .as_object()
        .cloned()
        .unwrap_or_default();
    status.remove("completionTime");
    status
        .entry("startTime")
        .or_insert_with(|| Value::from(now));
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| {
            !matches!(
                c.get("type").and_then(Value::as_str),
                Some("FailureTarget" | "Failed" | "SuccessCriteriaMet" | "Complete")
            )
        })
        .cloned()
        .collect();
    for type_ in ["FailureTarget", "Failed"] {
        conditions.push(serde_json::json!({
            "type": type_, "status": "True", "reason": reason, "message": message,
            "lastProbeTime": now, "lastTransitionTime": now,
        }));
    }
    status.insert("conditions".into(), Value::Array(conditions));
    Value::Object(status)
}

/// Whether `status` (copied fields) shows `Complete` or `Failed`.
fn finished(status: &Value) -> bool {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(terminal)
}

/// A `Complete` or `Failed` condition that is true.
fn terminal(condition: &Value) -> bool {
    ends_job(
        condition["type"].as_str().unwrap_or_default(),
        condition["status"].as_str().unwrap_or_default(),
    )
}

/// When the worker's Job finished, if `desired` shows it finished and the
/// manager Job does not yet (the moment a finish first reaches the manager).
pub fn newly_finished_at(current: Option<&JobStatus>, desired: &Value) -> Option<Timestamp> {
    let shown = current
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| ends_job(&c.type_, &c.status));
    if shown {
        return None;
    }
    desired["conditions"]
        .as_array()?
        .iter()
        .find(|c| terminal(c))?
        .get("lastTransitionTime")?
        .as_str()?
        .parse()
        .ok()
}

/// Whether the manager Job's status differs from `desired` in a copied field.
pub fn differs(current: Option<&JobStatus>, desired: &Value) -> bool {
    let current = current
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(Value::Null);
    normalized(&pick(&current)) != normalized(desired)
}

/// The merge patch for the status subresource that makes the copied fields
/// `status`: each copied field it lacks is removed (null), whatever the
/// manager's cache shows, so a write that cache has not seen yet is undone
/// too. A merge patch costs the API server less than a server-side apply of
/// the same fields (no applied configuration to convert and merge).
pub fn patch_body(status: &Value) -> Value {
    super::patch_naming(&COPIED, status)
}

fn pick(status: &Value) -> Value {
    super::pick(&COPIED, status)
}

/// Zero counts and absent counts mean the same to the API server.
fn normalized(status: &Value) -> Value {
    let mut status = status.as_object().cloned().unwrap_or_default();
    status.retain(|_, v| v != &Value::from(0));
    Value::Object(status)
}

#[cfg(test)]
#[path = "job_status_tests.rs"]
mod tests;
