use super::*;
use serde_json::{Map, json};

/// A status as the API server would read it.
fn typed(status: Value) -> JobStatus {
    serde_json::from_value(status).unwrap()
}

/// A status as it would be written.
fn json(status: &JobStatus) -> Value {
    serde_json::to_value(status).unwrap()
}

fn copied_json(worker: &[u8]) -> Value {
    json(&copied(worker).unwrap())
}

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
fn copies_counts_times_and_conditions_in_the_workers_order() {
    let status = copied_json(WORKER.as_bytes());
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
    let restarted = typed(json!({"active": 2, "succeeded": 1}));
    let status = json(&reconciled(
        Some(&shown),
        &restarted,
        false,
        Counting::default(),
    ));
    assert_eq!(status["startTime"], "2026-11-22T09:00:00Z");
    assert_eq!(
        (status["succeeded"].as_i64(), status["failed"].as_i64()),
        (Some(3), Some(1))
    );
    assert_eq!(status["active"], 2);
    assert_eq!(
        reconciled(None, &restarted, false, Counting::default()),
        restarted
    );
}

#[test]
fn a_job_placed_again_shows_what_was_carried_plus_what_its_new_mirror_reports() {
    use super::super::carried::Carried;
    let shown = typed(json!({"startTime": "2026-11-22T09:00:00Z", "succeeded": 2, "failed": 1}));
    let carried = Counting {
        carried: Carried {
            succeeded: 2,
            failed: 1,
        },
        succeeded_may_fall: false,
    };
    let fresh = typed(json!({"active": 2, "ready": 1}));
    let status = json(&reconciled(Some(&shown), &fresh, false, carried));
    assert_eq!(
        (
            &status["active"],
            &status["ready"],
            &status["succeeded"],
            &status["failed"]
        ),
        (&json!(2), &json!(1), &json!(2), &json!(1)),
        "what runs is the new mirror's; what ran is carried"
    );
    let one_more = typed(json!({"active": 1, "ready": 1, "succeeded": 1}));
    let status = json(&reconciled(Some(&shown), &one_more, false, carried));
    assert_eq!(status["succeeded"], 3, "carried plus the new mirror's");
}

#[test]
fn an_indexed_job_as_wide_as_its_completions_shows_its_new_mirrors_succeeded() {
    let shown = typed(json!({"succeeded": 3, "failed": 1, "completedIndexes": "0-2"}));
    let fresh = typed(json!({"active": 4, "succeeded": 0}));
    let may_fall = Counting {
        succeeded_may_fall: true,
        ..Counting::default()
    };
    let status = json(&reconciled(Some(&shown), &fresh, false, may_fall));
    assert!(status.get("succeeded").is_none_or(|s| s == 0), "{status}");
    assert_eq!(status["failed"], 1, "failed never falls");
    let status = json(&reconciled(
        Some(&shown),
        &fresh,
        false,
        Counting::default(),
    ));
    assert_eq!(status["succeeded"], 3, "elsewhere succeeded never falls");
}

#[test]
fn a_suspended_job_shows_no_start_time_and_its_terminating_pods_as_active() {
    let shown: JobStatus = serde_json::from_value(json!({
        "startTime": "2026-11-22T09:00:00Z", "active": 2
    }))
    .unwrap();
    let stopping =
        typed(json!({"active": 0, "terminating": 2, "startTime": "2026-11-22T09:00:00Z"}));
    let status = json(&reconciled(
        Some(&shown),
        &stopping,
        true,
        Counting::default(),
    ));
    assert!(status.get("startTime").is_none(), "{status}");
    assert_eq!(status["active"], 2, "Pods still on the worker count");
    let stopped = typed(json!({"active": 0, "terminating": 0, "succeeded": 1}));
    let status = json(&reconciled(
        Some(&shown),
        &stopped,
        true,
        Counting::default(),
    ));
    assert_eq!(status["active"], 0, "every Pod is gone");
    assert!(status.get("startTime").is_none());
    assert_eq!(status["succeeded"], 1);
    let refused = failed(
        &JobStatus::default(),
        "RemoteRejected",
        "invalid",
        "2026-11-22T11:00:00Z".parse().unwrap(),
    );
    let status = json(&reconciled(None, &refused, true, Counting::default()));
    assert_eq!(
        status["startTime"], "2026-11-22T11:00:00Z",
        "a finished Job keeps the start time the API server requires"
    );
}

#[test]
fn a_failed_status_follows_the_api_servers_rules_for_a_foreign_manager() {
    let running = typed(json!({
        "active": 2, "ready": 1, "succeeded": 1, "startTime": "2026-11-22T10:00:00Z",
        "conditions": [{"type": "Suspended", "status": "False"}],
    }));
    let status = json(&failed(
        &running,
        "RemoteJobLost",
        "lost 3 times",
        "2026-11-22T11:00:00Z".parse().unwrap(),
    ));
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

    let never_started = json(&failed(
        &JobStatus::default(),
        "RemoteRejected",
        "invalid",
        "2026-11-22T11:00:00Z".parse().unwrap(),
    ));
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
        newly_finished_at(None, &typed(json!({"active": 1}))),
        None,
        "still running"
    );
}

#[test]
fn suspension_zeroes_what_runs_and_keeps_what_ran() {
    let status = after_suspension(&typed(json!({"active": 3, "ready": 2, "succeeded": 4})));
    assert_eq!(
        json(&status),
        json!({"active": 0, "ready": 0, "terminating": 0, "succeeded": 4})
    );
}

#[test]
fn the_patch_sets_the_copied_fields_and_removes_those_the_worker_dropped() {
    let patch = patch_body(&typed(
        json!({"active": 1, "conditions": [{"type": "Complete", "status": "True"}]}),
    ));
    let status = &patch["status"];
    assert_eq!(status["active"], 1);
    assert_eq!(
        status["conditions"],
        json!([{"type": "Complete", "status": "True"}])
    );
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
    let desired = typed(json!({"succeeded": 1, "startTime": "2026-01-01T00:00:00Z"}));
    json_patch::merge(&mut current, &patch_body(&desired));
    assert_eq!(
        current,
        json!({"status": {
            "succeeded": 1, "startTime": "2026-01-01T00:00:00Z",
            "uncountedTerminatedPods": {"succeeded": ["a"]}
        }})
    );
}
