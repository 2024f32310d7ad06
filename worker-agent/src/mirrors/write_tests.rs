use super::*;

fn job(suspend: bool) -> Job {
    serde_json::from_value(serde_json::json!({"spec": {"suspend": suspend, "template": {}}}))
        .unwrap()
}

#[test]
fn a_mirror_queued_in_the_workers_kueue_keeps_what_that_kueue_owns() {
    let labelled = |mut job: Job, queue: &str| {
        job.metadata.labels = Some([(QUEUE_NAME_LABEL.to_string(), queue.to_string())].into());
        job
    };
    let existing = labelled(job(false), "batch");
    let mut desired = labelled(job(true), "batch-renamed");
    assert!(keep_what_the_workers_kueue_owns(&mut desired, &existing));
    assert_eq!(desired.spec.as_ref().unwrap().suspend, Some(false));
    assert_eq!(desired.metadata.labels.unwrap()[QUEUE_NAME_LABEL], "batch");

    let mut unqueued = job(true);
    assert!(!keep_what_the_workers_kueue_owns(&mut unqueued, &existing));
    assert_eq!(unqueued.spec.unwrap().suspend, Some(true));
}

#[tokio::test]
async fn a_kind_the_agent_does_not_mirror_is_refused_before_anything_is_read() {
    let apply = ApplyMirror {
        origin_uid: "u".into(),
        revision: 1,
        object: b"{}".to_vec(),
        kind: Some(jobrelay_proto::kinds::JOBSET.to_wire()),
    };
    // A client that reaches nothing: the refusal needs no API server.
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let policy = NamespacePolicy::everywhere(None);
    let refusal = try_apply(&client, ("hub", ""), &policy, &[], (&apply, &[])).await;
    assert!(
        matches!(
            &refusal,
            Err(ApplyFailure::Refused(RejectReason::KindNotMirrored, _))
        ),
        "{refusal:?}"
    );
}

fn cached(revision: u64, finished: bool, started: bool) -> Job {
    let status = match (finished, started) {
        (true, _) => {
            serde_json::json!({"conditions": [{"type": "Complete", "status": "True"}], "startTime": "2026-01-01T00:00:00Z"})
        }
        (false, true) => serde_json::json!({"startTime": "2026-01-01T00:00:00Z"}),
        (false, false) => serde_json::json!({}),
    };
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "train", "namespace": "ml", "resourceVersion": "42",
            "labels": {ORIGIN_LABEL: "hub", ORIGIN_UID_LABEL: "u"},
            "annotations": {REVISION_ANNOTATION: revision.to_string()},
        },
        "spec": {"suspend": !started, "template": {}},
        "status": status,
    }))
    .unwrap()
}

fn revision(revision: u64) -> ApplyMirror {
    ApplyMirror {
        origin_uid: "u".into(),
        revision,
        object: Vec::new(),
        kind: None,
    }
}

#[test]
fn a_newer_revision_of_a_cached_mirror_is_applied_against_the_cached_version() {
    let desired = job(false);
    let at = update_in_place(
        Some(&cached(1, false, false)),
        &desired,
        "hub",
        &revision(2),
    );
    assert_eq!(at.as_deref(), Some("42"));
}

#[test]
fn without_a_cached_copy_or_with_the_revision_held_the_mirror_is_read_first() {
    let desired = job(false);
    assert_eq!(update_in_place(None, &desired, "hub", &revision(2)), None);
    let held = cached(2, false, false);
    assert_eq!(
        update_in_place(Some(&held), &desired, "hub", &revision(2)),
        None
    );
}

#[test]
fn another_origins_or_an_older_mirrors_job_is_never_updated_from_the_cache() {
    let desired = job(false);
    let current = cached(1, false, false);
    assert_eq!(
        update_in_place(Some(&current), &desired, "other-hub", &revision(2)),
        None
    );
    let older = ApplyMirror {
        origin_uid: "v".into(),
        ..revision(2)
    };
    assert_eq!(
        update_in_place(Some(&current), &desired, "hub", &older),
        None
    );
}

#[test]
fn a_finished_a_queued_or_a_started_mirror_being_suspended_is_read_first() {
    let finished = cached(1, true, true);
    assert_eq!(
        update_in_place(Some(&finished), &job(false), "hub", &revision(2)),
        None
    );
    let mut queued = job(false);
    queued.metadata.labels = Some([(QUEUE_NAME_LABEL.to_string(), "batch".to_string())].into());
    let current = cached(1, false, false);
    assert_eq!(
        update_in_place(Some(&current), &queued, "hub", &revision(2)),
        None
    );
    let started = cached(1, false, true);
    assert_eq!(
        update_in_place(Some(&started), &job(true), "hub", &revision(2)),
        None
    );
    assert!(update_in_place(Some(&started), &job(false), "hub", &revision(2)).is_some());
}

#[test]
fn a_preparation_found_invalid_is_tried_again_and_any_other_refusal_stands() {
    let finished = "Job.batch \"train\" is invalid: status.startTime: Required value: startTime is required for finished job";
    match preparation_failure(ApplyFailure::Refused(
        RejectReason::Invalid,
        finished.into(),
    )) {
        ApplyFailure::Wait(why) => assert!(why.contains(finished), "{why}"),
        other => panic!("a mirror that finished meanwhile is read again: {other:?}"),
    }
    let forbidden = ApplyFailure::Refused(RejectReason::Forbidden, "no".into());
    assert_eq!(preparation_failure(forbidden.clone()), forbidden);
    let unavailable = ApplyFailure::Refused(RejectReason::Unavailable, "down".into());
    assert_eq!(preparation_failure(unavailable.clone()), unavailable);
}

/// An apply of this origin's mirror `train` into `namespace`.
fn apply_into(namespace: &str) -> ApplyMirror {
    let job = serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": namespace,
            "labels": {ORIGIN_LABEL: "hub", ORIGIN_UID_LABEL: "u"}},
        "spec": {"template": {}},
    });
    ApplyMirror {
        origin_uid: "u".into(),
        revision: 2,
        object: serde_json::to_vec(&job).unwrap(),
        kind: Some(jobrelay_proto::kinds::JOB.to_wire()),
    }
}

#[tokio::test]
async fn an_apply_outside_the_policy_is_refused_for_good_only_where_no_mirror_can_be() {
    // A client that reaches nothing: every read fails.
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let policy = NamespacePolicy {
        all: false,
        names: ["ml".to_string()].into(),
        selector: None,
        own: Some("jobrelay-system".into()),
    };
    let answer = |namespace: &'static str| {
        let (client, policy) = (client.clone(), policy.clone());
        async move {
            let apply = apply_into(namespace);
            try_apply(&client, ("hub", ""), &policy, &[], (&apply, &[])).await
        }
    };
    // No policy ever let a mirror in: refused without a read.
    for namespace in ["kube-system", "jobrelay-system"] {
        let refusal = answer(namespace).await;
        assert!(
            matches!(
                &refusal,
                Err(ApplyFailure::Refused(RejectReason::NamespaceNotAllowed, _))
            ),
            "{namespace}: {refusal:?}"
        );
    }
    // An earlier policy may have: whether its mirror runs there could not
    // be read (the API server did not answer), so the refusal can clear.
    match answer("team-b").await {
        Err(ApplyFailure::Refused(reason, message)) => {
            assert!(!reason.is_permanent(), "{reason:?}: {message}");
            assert!(message.contains("team-b"), "{message}");
        }
        other => panic!("team-b: {other:?}"),
    }
}
