use super::*;
use jobrelay_proto::wire::ORIGIN_UID_LABEL;
use kube::runtime::reflector::store;
use serde_json::json;

fn event(kind: &str, name: &str, uid: &str, reason: &str, message: &str) -> CoreEvent {
    serde_json::from_value(json!({
        "metadata": {"name": format!("{name}.1"), "namespace": "ml"},
        "involvedObject": {"kind": kind, "name": name, "namespace": "ml", "uid": uid},
        "reason": reason, "message": message, "type": "Warning",
        "source": {"component": "default-scheduler"},
    }))
    .expect("an Event")
}

fn owners() -> Owners {
    let (pods, mut pod_writer) = store::<Pod>();
    let (jobs, mut job_writer) = store::<Job>();
    let labelled = |uid: &str| {
        json!({"name": "x", "namespace": "ml", "uid": uid,
                                      "labels": {ORIGIN_UID_LABEL: "origin-1"}})
    };
    let mut pod: Pod = serde_json::from_value(json!({"metadata": labelled("pod-uid")})).unwrap();
    pod.metadata.name = Some("train-abc".into());
    pod_writer.apply_watcher_event(&watcher::Event::Apply(pod));
    let mut job: Job = serde_json::from_value(json!({"metadata": labelled("job-uid")})).unwrap();
    job.metadata.name = Some("train".into());
    job_writer.apply_watcher_event(&watcher::Event::Apply(job));
    Owners {
        pods,
        jobs,
        jobsets: None,
    }
}

#[test]
fn an_event_is_a_mirrors_when_it_is_about_a_cached_object_of_the_same_uid() {
    let owners = owners();
    let on_pod = event("Pod", "train-abc", "pod-uid", "FailedMount", "m");
    assert_eq!(owners.origin_of(&on_pod).as_deref(), Some("origin-1"));
    let on_job = event("Job", "train", "job-uid", "FailedCreate", "m");
    assert_eq!(owners.origin_of(&on_job).as_deref(), Some("origin-1"));
    let earlier_pod = event("Pod", "train-abc", "another-uid", "FailedMount", "m");
    assert_eq!(
        owners.origin_of(&earlier_pod),
        None,
        "another object of that name"
    );
    let elsewhere = event("Pod", "other", "x", "FailedMount", "m");
    assert_eq!(owners.origin_of(&elsewhere), None, "not this origin's");
    let node = event("Node", "n1", "n", "Rebooted", "m");
    assert_eq!(owners.origin_of(&node), None);
    let jobset = event("JobSet", "train", "job-uid", "X", "m");
    assert_eq!(
        owners.origin_of(&jobset),
        None,
        "the worker serves no JobSets"
    );
}

#[test]
fn what_is_told_names_the_object_the_reason_the_reporter_and_a_message_cut_short() {
    let long = "y".repeat(2 * MESSAGE_BYTES);
    let told = told(&event(
        "Pod",
        "train-abc",
        "pod-uid",
        "FailedScheduling",
        &long,
    ));
    assert_eq!(told.object, "Pod train-abc");
    assert_eq!(told.reason, "FailedScheduling");
    assert_eq!(told.source, "default-scheduler");
    assert!(told.message.len() <= MESSAGE_BYTES && told.message.ends_with('…'));
}

#[test]
fn a_reason_about_a_kind_of_object_is_told_once_a_window_per_mirror() {
    let mut told = Told::default();
    let now = Instant::now();
    let backoff = |pod: &str| super::told(&event("Pod", pod, "u", "BackOff", pod));
    assert!(told.first("m1", &backoff("a"), now));
    assert!(
        !told.first("m1", &backoff("b"), now),
        "another Pod, same reason"
    );
    assert!(told.first("m2", &backoff("a"), now), "another mirror");
    let create = super::told(&event("Job", "train", "u", "FailedCreate", "quota"));
    assert!(told.first("m1", &create, now), "another reason");
    let later = now + TOLD_FOR;
    assert!(told.first("m1", &backoff("c"), later), "the window ran out");
}

#[test]
fn a_mirror_is_told_at_most_a_few_reasons_a_window() {
    let mut told = Told::default();
    let now = Instant::now();
    let reasons: Vec<bool> = (0..PER_MIRROR + 2)
        .map(|n| {
            let event = super::told(&event("Pod", "p", "u", &format!("R{n}"), ""));
            told.first("m1", &event, now)
        })
        .collect();
    assert_eq!(reasons.iter().filter(|told| **told).count(), PER_MIRROR);
}

#[test]
fn a_warning_that_a_mirror_ended_is_not_told_its_pods_warnings_are() {
    assert!(!worth_telling(&event(
        "Job",
        "train",
        "u",
        "BackoffLimitExceeded",
        ""
    )));
    assert!(!worth_telling(&event(
        "Job",
        "train",
        "u",
        "DeadlineExceeded",
        ""
    )));
    assert!(worth_telling(&event(
        "Job",
        "train",
        "u",
        "FailedCreate",
        "quota"
    )));
    assert!(worth_telling(&event(
        "Pod",
        "train-a",
        "u",
        "DeadlineExceeded",
        ""
    )));
}
