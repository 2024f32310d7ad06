//! Copying a worker JobSet's status onto its manager JobSet (the status
//! part of [`RelayedKind`](super::RelayedKind) for JobSet): the worker
//! JobSet controller's conditions, `terminalState`, restart counts and each
//! replicated Job's counts, written with a merge patch naming every copied
//! field, a dropped one as null.

use jobrelay_kinds::jobset::JobSetStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
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
pub fn copied(worker_status: &[u8]) -> serde_json::Result<JobSetStatus> {
    let status: JobSetStatus = serde_json::from_slice(worker_status)?;
    Ok(pick(&status))
}

/// The copied part of a status: its conditions, terminal state and the
/// untyped fields named in [`COPIED`].
pub fn pick(status: &JobSetStatus) -> JobSetStatus {
    JobSetStatus {
        conditions: status.conditions.clone(),
        terminal_state: status.terminal_state.clone(),
        rest: status
            .rest
            .iter()
            .filter(|(field, value)| COPIED.contains(&field.as_str()) && !value.is_null())
            .map(|(field, value)| (field.clone(), value.clone()))
            .collect(),
    }
}

/// When the JobSet finished: its `Completed` or `Failed` condition's
/// transition time.
pub fn finish_time(copied: &JobSetStatus) -> Option<Timestamp> {
    copied
        .conditions
        .iter()
        .find(|c| ending(c))
        .map(|c| c.last_transition_time.0)
}

fn ending(condition: &Condition) -> bool {
    matches!(condition.type_.as_str(), "Completed" | "Failed") && condition.status == "True"
}

/// Whether a replicated Job counts active Jobs.
pub fn runs_pods(status: &JobSetStatus) -> bool {
    status
        .rest
        .get("replicatedJobsStatus")
        .and_then(Value::as_array)
        .is_some_and(|jobs| {
            jobs.iter()
                .any(|job| job["active"].as_i64().is_some_and(|n| n > 0))
        })
}

/// Whether a Pod of any replicated Job is ready or finished.
pub fn pods_started(status: &JobSetStatus) -> bool {
    let jobs = status
        .rest
        .get("replicatedJobsStatus")
        .and_then(Value::as_array);
    jobs.into_iter().flatten().any(|job| {
        ["ready", "succeeded", "failed"]
            .iter()
            .any(|count| job[count].as_i64().is_some_and(|n| n > 0))
    })
}

/// The merge patch that makes the copied fields `status`.
pub fn patch_body(status: &JobSetStatus) -> Value {
    super::patch_naming(&COPIED, status)
}

/// Nothing runs any more: each replicated Job's active, ready and
/// suspended Jobs are none, what succeeded and failed stays.
pub fn after_suspension(last: &JobSetStatus) -> JobSetStatus {
    let mut status = last.clone();
    if let Some(Value::Array(jobs)) = status.rest.get_mut("replicatedJobsStatus") {
        for job in jobs.iter_mut().filter_map(Value::as_object_mut) {
            for field in ["active", "ready", "suspended"] {
                job.insert(field.into(), Value::from(0));
            }
        }
    }
    status
}

/// Ends the JobSet `Failed` for `reason`: a `Failed` condition in place of
/// any ending one, and `terminalState: Failed`.
pub fn failed(shown: &JobSetStatus, reason: &str, message: &str, now: Timestamp) -> JobSetStatus {
    let mut status = after_suspension(shown);
    status.conditions.retain(|c| !ending(c));
    status.conditions.push(Condition {
        type_: "Failed".into(),
        status: "True".into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Time(now),
        observed_generation: None,
    });
    status.terminal_state = Some("Failed".into());
    status
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

    fn status(value: Value) -> JobSetStatus {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_jobset_controllers_status_is_copied_and_its_finish_timed() {
        let copy = serde_json::to_value(copied(WORKER.as_bytes()).unwrap()).unwrap();
        assert_eq!(copy["terminalState"], "Completed");
        assert_eq!(copy["replicatedJobsStatus"][1]["succeeded"], 3);
        assert!(copy.get("somethingNew").is_none(), "only the known fields");
        assert_eq!(
            finish_time(&copied(WORKER.as_bytes()).unwrap()),
            Some("2026-11-27T10:05:00Z".parse().unwrap())
        );
        assert_eq!(finish_time(&status(json!({"restarts": 0}))), None);
        let patch = patch_body(&status(json!({"restarts": 2})));
        assert_eq!(patch["status"]["restarts"], 2);
        assert_eq!(patch["status"]["terminalState"], Value::Null, "dropped");
    }

    #[test]
    fn failing_replaces_the_ending_condition_and_stops_what_runs() {
        let running = status(
            json!({"conditions": [{"type": "StartupPolicyCompleted", "status": "True",
                "reason": "AllStarted", "message": "", "lastTransitionTime": "2026-11-27T10:00:00Z"}],
            "replicatedJobsStatus": [{"name": "workers", "active": 3, "ready": 2, "succeeded": 1}]}),
        );
        assert!(runs_pods(&running));
        let failed = failed(
            &running,
            "RemoteJobLost",
            "lost",
            "2026-11-27T11:00:00Z".parse().unwrap(),
        );
        assert!(!runs_pods(&failed));
        let failed = serde_json::to_value(failed).unwrap();
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
