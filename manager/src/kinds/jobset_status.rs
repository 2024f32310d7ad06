//! Copying a worker JobSet's status onto its manager JobSet (the status
//! part of [`RelayedKind`](super::RelayedKind) for JobSet): the worker
//! JobSet controller's conditions, `terminalState`, restart counts and each
//! replicated Job's counts, written with a merge patch naming every copied
//! field, a dropped one as null.

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// The JobSetStatus fields that mirror what happens on the worker.
const COPIED: [&str; 5] = [
    "conditions",
    "terminalState",
    "restarts",
    "restartsCountTowardsMax",
    "replicatedJobsStatus",
];

/// The copied part of a worker JobSetStatus.
pub fn copied(worker_status: &[u8]) -> serde_json::Result<Value> {
    let status: Value = serde_json::from_slice(worker_status)?;
    Ok(pick(&status))
}

/// The copied part of a status.
pub fn pick(status: &Value) -> Value {
    super::pick(&COPIED, status)
}

/// When the JobSet finished: its `Completed` or `Failed` condition's
/// transition time.
pub fn finish_time(copied: &Value) -> Option<Timestamp> {
    copied["conditions"]
        .as_array()?
        .iter()
        .find(|c| ending(c))?
        .get("lastTransitionTime")?
        .as_str()?
        .parse()
        .ok()
}

fn ending(condition: &Value) -> bool {
    matches!(condition["type"].as_str(), Some("Completed" | "Failed"))
        && condition["status"].as_str() == Some("True")
}

/// The merge patch that makes the copied fields `status`.
pub fn patch_body(status: &Value) -> Value {
    super::patch_naming(&COPIED, status)
}

/// Nothing runs any more: each replicated Job's active, ready and
/// suspended Jobs are none, what succeeded and failed stays.
pub fn after_suspension(last: &Value) -> Value {
    let mut status = last.as_object().cloned().unwrap_or_default();
    if let Some(Value::Array(jobs)) = status.get_mut("replicatedJobsStatus") {
        for job in jobs.iter_mut().filter_map(Value::as_object_mut) {
            for field in ["active", "ready", "suspended"] {
                job.insert(field.into(), Value::from(0));
            }
        }
    }
    Value::Object(status)
}

/// Ends the JobSet `Failed` for `reason`: a `Failed` condition in place of
/// any ending one, and `terminalState: Failed`.
pub fn failed(shown: &Value, reason: &str, message: &str, now: &str) -> Value {
    let mut status = after_suspension(shown)
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| !ending(c))
        .cloned()
        .collect();
    conditions.push(serde_json::json!({
        "type": "Failed", "status": "True", "reason": reason, "message": message,
        "lastTransitionTime": now,
    }));
    status.insert("conditions".into(), Value::Array(conditions));
    status.insert("terminalState".into(), Value::from("Failed"));
    Value::Object(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const WORKER: &str = r#"{
        "restarts": 1,
        "terminalState": "Completed",
        "conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
            "message": "jobset completed successfully", "lastTransitionTime": "2026-11-27T10:05:00Z"}],
        "replicatedJobsStatus": [
            {"name": "leader", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0},
            {"name": "workers", "ready": 0, "succeeded": 3, "failed": 0, "active": 0, "suspended": 0}],
        "somethingNew": true
    }"#;

    #[test]
    fn the_jobset_controllers_status_is_copied_and_its_finish_timed() {
        let status = copied(WORKER.as_bytes()).unwrap();
        assert_eq!(status["terminalState"], "Completed");
        assert_eq!(status["replicatedJobsStatus"][1]["succeeded"], 3);
        assert!(
            status.get("somethingNew").is_none(),
            "only the known fields"
        );
        assert_eq!(
            finish_time(&status),
            Some("2026-11-27T10:05:00Z".parse().unwrap())
        );
        assert_eq!(finish_time(&json!({"restarts": 0})), None);
        let patch = patch_body(&json!({"restarts": 2}));
        assert_eq!(patch["status"]["restarts"], 2);
        assert_eq!(patch["status"]["terminalState"], Value::Null, "dropped");
    }

    #[test]
    fn failing_replaces_the_ending_condition_and_stops_what_runs() {
        let running = json!({"conditions": [{"type": "StartupPolicyCompleted", "status": "True"}],
            "replicatedJobsStatus": [{"name": "workers", "active": 3, "ready": 2, "succeeded": 1}]});
        let failed = failed(&running, "RemoteJobLost", "lost", "2026-11-27T11:00:00Z");
        assert_eq!(failed["terminalState"], "Failed");
        let types: Vec<&str> = failed["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["StartupPolicyCompleted", "Failed"]);
        let workers = &failed["replicatedJobsStatus"][0];
        assert_eq!(
            (workers["active"].as_i64(), workers["succeeded"].as_i64()),
            (Some(0), Some(1))
        );
    }
}
