//! Copying a worker Job's status onto its manager Job. The manager Job's
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

/// A copied status as the manager keeps it between a report and its write:
/// its JSON text. The manager holds one per mirror, and the text takes a
/// tenth of the memory of the parsed tree (a few hundred bytes for a
/// finished Job's, where the tree's maps take several kilobytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusText(Box<str>);

impl StatusText {
    pub fn new(copied: &Value) -> Self {
        StatusText(copied.to_string().into_boxed_str())
    }

    /// The copied status again.
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).expect("the text of a JSON value reads back")
    }
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
    let mut patch = Map::new();
    for field in COPIED {
        let value = status.get(field).cloned().unwrap_or(Value::Null);
        patch.insert(field.into(), value);
    }
    serde_json::json!({ "status": patch })
}

fn pick(status: &Value) -> Value {
    let mut picked = Map::new();
    for field in COPIED {
        if let Some(value) = status.get(field).filter(|v| !v.is_null()) {
            picked.insert(field.into(), value.clone());
        }
    }
    Value::Object(picked)
}

/// Zero counts and absent counts mean the same to the API server.
fn normalized(status: &Value) -> Value {
    let mut status = status.as_object().cloned().unwrap_or_default();
    status.retain(|_, v| v != &Value::from(0));
    Value::Object(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const WORKER: &str = r#"{
        "active": 0, "ready": 0, "succeeded": 10, "failed": 1, "terminating": 0,
        "startTime": "2026-11-22T10:00:00Z", "completionTime": "2026-11-22T10:05:00Z",
        "uncountedTerminatedPods": {"succeeded": ["p1"]},
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": "2026-11-22T10:05:00Z"},
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-22T10:05:00Z"}
        ]
    }"#;

    fn condition_types(status: &Value) -> Vec<&str> {
        let conditions = status["conditions"].as_array().unwrap();
        conditions
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn a_kept_status_reads_back_as_copied() {
        let copied = copied(WORKER.as_bytes()).unwrap();
        let kept = StatusText::new(&copied);
        assert_eq!(kept.value(), copied);
        assert!(kept.0.len() < WORKER.len(), "{kept:?}");
    }

    #[test]
    fn copies_counts_times_and_conditions_in_the_workers_order() {
        let status = copied(WORKER.as_bytes()).unwrap();
        assert_eq!(status["succeeded"], 10);
        assert_eq!(status["completionTime"], "2026-11-22T10:05:00Z");
        assert_eq!(condition_types(&status), ["SuccessCriteriaMet", "Complete"]);
        assert!(status.get("uncountedTerminatedPods").is_none());
    }

    #[test]
    fn an_unchanged_status_is_not_written_again() {
        let desired = copied(WORKER.as_bytes()).unwrap();
        let current: JobStatus = serde_json::from_str(WORKER).unwrap();
        assert!(!differs(Some(&current), &desired));
        assert!(differs(None, &desired));
        let running = copied(br#"{"active": 1, "startTime": "2026-11-22T10:00:00Z"}"#).unwrap();
        assert!(differs(Some(&current), &running));
    }

    #[test]
    fn a_mirror_that_started_over_keeps_the_counts_and_start_time_already_shown() {
        let shown: JobStatus = serde_json::from_value(json!({
            "startTime": "2026-11-22T09:00:00Z", "succeeded": 3, "failed": 1, "active": 0
        }))
        .unwrap();
        let restarted = json!({"active": 2, "succeeded": 1});
        let status = reconciled(Some(&shown), &restarted, false);
        assert_eq!(status["startTime"], "2026-11-22T09:00:00Z");
        assert_eq!(
            (status["succeeded"].as_i64(), status["failed"].as_i64()),
            (Some(3), Some(1))
        );
        assert_eq!(status["active"], 2);
        assert_eq!(reconciled(None, &restarted, false), restarted);
    }

    #[test]
    fn a_suspended_job_shows_no_start_time_and_its_terminating_pods_as_active() {
        let shown: JobStatus = serde_json::from_value(json!({
            "startTime": "2026-11-22T09:00:00Z", "active": 2
        }))
        .unwrap();
        let stopping = json!({"active": 0, "terminating": 2, "startTime": "2026-11-22T09:00:00Z"});
        let status = reconciled(Some(&shown), &stopping, true);
        assert!(status.get("startTime").is_none(), "{status}");
        assert_eq!(status["active"], 2, "Pods still on the worker count");
        let stopped = json!({"active": 0, "terminating": 0, "succeeded": 1});
        let status = reconciled(Some(&shown), &stopped, true);
        assert_eq!(status["active"], 0, "every Pod is gone");
        assert!(status.get("startTime").is_none());
        assert_eq!(status["succeeded"], 1);
        let refused = failed(
            &json!({}),
            "RemoteRejected",
            "invalid",
            "2026-11-22T11:00:00Z",
        );
        let status = reconciled(None, &refused, true);
        assert_eq!(
            status["startTime"], "2026-11-22T11:00:00Z",
            "a finished Job keeps the start time the API server requires"
        );
    }

    #[test]
    fn a_failed_status_follows_the_api_servers_rules_for_a_foreign_manager() {
        let running = json!({
            "active": 2, "ready": 1, "succeeded": 1, "startTime": "2026-11-22T10:00:00Z",
            "conditions": [{"type": "Suspended", "status": "False"}],
        });
        let status = failed(
            &running,
            "RemoteJobLost",
            "lost 3 times",
            "2026-11-22T11:00:00Z",
        );
        assert_eq!(
            (status["active"].as_i64(), status["ready"].as_i64()),
            (Some(0), Some(0))
        );
        assert_eq!(
            status["startTime"], "2026-11-22T10:00:00Z",
            "a start time is kept"
        );
        assert_eq!(status["succeeded"], 1);
        assert_eq!(
            condition_types(&status),
            ["Suspended", "FailureTarget", "Failed"]
        );
        assert_eq!(status["conditions"][2]["reason"], "RemoteJobLost");

        let never_started = failed(
            &json!({}),
            "RemoteRejected",
            "invalid",
            "2026-11-22T11:00:00Z",
        );
        assert_eq!(never_started["startTime"], "2026-11-22T11:00:00Z");
        assert!(never_started.get("completionTime").is_none());
    }

    #[test]
    fn a_finish_is_timed_once_when_it_first_reaches_the_manager() {
        let finished = copied(WORKER.as_bytes()).unwrap();
        assert_eq!(
            newly_finished_at(None, &finished),
            Some("2026-11-22T10:05:00Z".parse().unwrap())
        );
        let shown: JobStatus = serde_json::from_str(WORKER).unwrap();
        assert_eq!(
            newly_finished_at(Some(&shown), &finished),
            None,
            "already shown"
        );
        assert_eq!(
            newly_finished_at(None, &json!({"active": 1})),
            None,
            "still running"
        );
    }

    #[test]
    fn suspension_zeroes_what_runs_and_keeps_what_ran() {
        let status = after_suspension(&json!({"active": 3, "ready": 2, "succeeded": 4}));
        assert_eq!(
            status,
            json!({"active": 0, "ready": 0, "terminating": 0, "succeeded": 4})
        );
    }

    #[test]
    fn the_patch_sets_the_copied_fields_and_removes_those_the_worker_dropped() {
        let patch = patch_body(&json!({"active": 1, "conditions": [{"type": "Complete"}]}));
        let status = &patch["status"];
        assert_eq!(status["active"], 1);
        assert_eq!(status["conditions"], json!([{"type": "Complete"}]));
        for dropped in ["ready", "startTime", "completionTime", "failedIndexes"] {
            assert!(
                status.get(dropped).is_some_and(Value::is_null),
                "{dropped} is removed"
            );
        }
        assert_eq!(status.as_object().map(Map::len), Some(COPIED.len()));
        assert_eq!(patch.as_object().map(Map::len), Some(1), "only the status");
    }

    #[test]
    fn a_patch_merged_onto_a_status_leaves_exactly_the_copied_fields_and_the_rest() {
        let mut current = json!({"status": {
            "active": 1, "ready": 1, "startTime": "2026-01-01T00:00:00Z",
            "uncountedTerminatedPods": {"succeeded": ["a"]}
        }});
        let desired = json!({"succeeded": 1, "startTime": "2026-01-01T00:00:00Z"});
        json_patch::merge(&mut current, &patch_body(&desired));
        assert_eq!(
            current,
            json!({"status": {
                "succeeded": 1, "startTime": "2026-01-01T00:00:00Z",
                "uncountedTerminatedPods": {"succeeded": ["a"]}
            }})
        );
    }
}
