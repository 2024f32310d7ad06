use super::*;
use crate::report::revision_of;
use jobrelay_proto::wire::REVISION_ANNOTATION;

fn job(status: serde_json::Value) -> Job {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "j", "annotations": {REVISION_ANNOTATION: "7"}},
        "status": status,
    }))
    .unwrap()
}

fn suspended_job(suspend: bool, started: bool) -> Job {
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
fn phases_follow_the_workers_job_status() {
    assert_eq!(job(serde_json::json!({})).phase(), MirrorPhase::Pending);
    assert_eq!(
        job(serde_json::json!({"active": 2})).phase(),
        MirrorPhase::Running
    );
    let complete = serde_json::json!({"conditions": [
        {"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]});
    assert_eq!(job(complete).phase(), MirrorPhase::Succeeded);
    let failed =
        serde_json::json!({"active": 1, "conditions": [{"type": "Failed", "status": "True"}]});
    assert_eq!(job(failed).phase(), MirrorPhase::Failed);
    let mut asked_to_suspend = job(serde_json::json!({}));
    asked_to_suspend.spec =
        Some(serde_json::from_value(serde_json::json!({"suspend": true, "template": {}})).unwrap());
    assert_eq!(
        asked_to_suspend.phase(),
        MirrorPhase::Suspended,
        "suspended before the Job controller wrote its condition"
    );
    assert_eq!(revision_of(&job(serde_json::json!({})).metadata), 7);
}

#[test]
fn a_cached_mirror_keeps_what_its_report_reads_and_not_its_template() {
    let mut cached: Job = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "j", "annotations": {REVISION_ANNOTATION: "7"}},
        "spec": {"suspend": true, "parallelism": 4, "template": {"spec": {"containers": [
            {"name": "train", "image": "trainer:1", "args": ["--epochs", "90"]}]}}},
        "status": {"active": 1},
    }))
    .unwrap();
    let before = (
        cached.phase(),
        revision_of(&cached.metadata),
        cached.status.clone(),
    );
    cached.keep_what_is_reported();
    assert_eq!(
        (
            cached.phase(),
            revision_of(&cached.metadata),
            cached.status.clone()
        ),
        before
    );
    let spec = cached.spec.unwrap();
    assert_eq!(spec.suspend, Some(true));
    assert_eq!(spec.parallelism, None);
    assert!(spec.template.spec.is_none(), "the pod template is dropped");
}

#[test]
fn a_started_mirror_is_suspended_and_its_start_time_cleared_before_a_suspended_revision() {
    assert_eq!(
        Job::before_update(&suspended_job(false, true), &suspended_job(true, false)),
        [Prepare::Suspend, Prepare::ClearStartTime]
    );
    assert_eq!(
        Job::before_update(&suspended_job(true, true), &suspended_job(true, false)),
        [Prepare::ClearStartTime],
        "suspended by an earlier revision, start time still set"
    );
}

#[test]
fn nothing_comes_first_for_a_running_revision_or_a_mirror_that_never_started() {
    let before = |existing: (bool, bool), desired: (bool, bool)| {
        Job::before_update(
            &suspended_job(existing.0, existing.1),
            &suspended_job(desired.0, desired.1),
        )
    };
    assert!(before((false, true), (false, false)).is_empty());
    assert!(before((true, false), (true, false)).is_empty());
    assert!(before((true, false), (false, false)).is_empty());
}

#[test]
fn a_finished_mirror_is_left_as_it_ran_and_one_about_to_finish_is_not() {
    let with = |type_: &str, status: &str| {
        let mut job = suspended_job(false, true);
        job.status.as_mut().unwrap().conditions = Some(vec![
            serde_json::from_value(serde_json::json!({"type": type_, "status": status})).unwrap(),
        ]);
        job
    };
    for outcome in ["Complete", "Failed"] {
        assert!(with(outcome, "True").is_finished(), "{outcome}");
    }
    for interim in ["SuccessCriteriaMet", "FailureTarget"] {
        assert!(!with(interim, "True").is_finished(), "{interim}");
    }
    assert!(!with("Complete", "False").is_finished());
    assert!(!with("Suspended", "True").is_finished());
    assert!(!suspended_job(false, true).is_finished(), "running");
}

#[test]
fn kueue_keeps_its_suspend_and_pod_template_and_the_rest_is_applied() {
    let mut existing = suspended_job(false, true);
    existing.spec.as_mut().unwrap().template.spec = Some(
        serde_json::from_value(serde_json::json!({
            "containers": [], "nodeSelector": {"pool": "worker-flavor"},
        }))
        .unwrap(),
    );
    let mut desired = suspended_job(true, false);
    desired.spec.as_mut().unwrap().parallelism = Some(3);
    Job::keep_what_kueue_owns(&mut desired, &existing);
    let spec = desired.spec.as_ref().unwrap();
    assert_eq!(spec.suspend, Some(false), "admitted by the worker's Kueue");
    assert_eq!(spec.template, existing.spec.as_ref().unwrap().template);
    assert_eq!(spec.parallelism, Some(3));
}
