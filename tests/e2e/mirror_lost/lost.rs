//! A mirror lost behind jobrelay's back — deleted, or its namespace deleted —
//! leaks no Pod and runs again, up to `mirrorLostLimit`, then fails the Job.

use super::*;

#[tokio::test]
async fn a_mirror_deleted_behind_jobrelays_back_leaks_no_pod_and_runs_again() {
    let s = Scenario::relayed("lost").await;
    futures::future::join3(
        lose_and_rerun(&s, "orphaned", PropagationPolicy::Orphan),
        lose_and_rerun(&s, "background", PropagationPolicy::Background),
        lose_and_rerun(&s, "foreground", PropagationPolicy::Foreground),
    )
    .await;
    let lost = s
        .relay
        .metrics()
        .await
        .expect("metrics")
        .lines()
        .filter(|l| l.starts_with("jobrelay_mirrors_lost_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>();
    assert!(
        lost >= 3.0,
        "jobrelay_mirrors_lost_total counts the losses: {lost}"
    );
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_job_whose_mirror_is_lost_mirror_lost_limit_times_fails() {
    let s = Scenario::relayed("lost-limit").await;
    let uid = s.create(s.job("unlucky").run_for(RUN_FOR)).await;
    let worker = s.assigned_worker("unlucky").await;
    let mut last = None;
    for _ in 0..3 {
        let mirror = running_mirror(&s, worker, "unlucky", last.as_deref()).await;
        delete_mirror(&s, worker, "unlucky", PropagationPolicy::Background).await;
        wait_remains_gone(&s, worker, &uid, &mirror).await;
        last = Some(mirror);
    }
    let failed = s.wait_condition("unlucky", "Failed").await;
    let (reason, message) = failure(&failed);
    assert_eq!(reason, "RemoteJobLost");
    assert!(
        message.contains("3 lost of 3 allowed") && message.contains(&worker.name),
        "{message}"
    );
    assert!(
        has_condition(&failed, "FailureTarget"),
        "FailureTarget before Failed"
    );
    assert_eq!(
        failed.status.as_ref().and_then(|s| s.active).unwrap_or(0),
        0
    );
    assert_eq!(
        s.mirrors().await.expect("mirrors").get(&uid),
        None,
        "not run a fourth time"
    );
    s.wait_released("unlucky").await;
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_worker_namespace_deleted_under_running_mirrors_runs_them_again_once_it_is_back() {
    let s = Scenario::relayed("ns-gone").await;
    let worker = s.worker("worker-1");
    let names = ["first", "second"];
    let mut uids = Vec::new();
    // The batch/v1 default backoffLimit: the namespace controller deleting a
    // Pod is one failure the worker's Job controller retries, not the end of
    // the Job (with a limit of 0 the worker would truthfully report it
    // Failed, and the manager Job would fail with it).
    for name in names {
        let job = s.job(name).label(CLUSTER_KEY, "worker-1").run_for(RUN_FOR);
        uids.push(s.create(job.backoff_limit(6)).await);
    }
    for name in names {
        running_mirror(&s, worker, name, None).await;
    }
    let namespaces: Api<Namespace> = Api::all(kit::client(worker).await);
    namespaces
        .delete(&s.ns, &DeleteParams::background())
        .await
        .expect("delete the worker namespace");
    for name in names {
        let waiting = wait_annotation(&s, name, DISPATCH_WAITING_ANNOTATION, |v| v.is_some()).await;
        let waiting = waiting.unwrap_or_default();
        assert!(
            waiting.contains("NAMESPACE_TERMINATING") || waiting.contains("NAMESPACE_MISSING"),
            "{waiting}"
        );
    }
    wait::until("the worker namespace gone", WAIT, || async {
        match namespaces.get_opt(&s.ns).await {
            Ok(None) => Seen::Ready(()),
            Ok(Some(ns)) => Seen::Waiting(format!("{:?}", ns.status)),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    kit::create_namespace(&kit::client(worker).await, &s.ns).await;
    for (name, uid) in names.iter().zip(&uids) {
        let done = wait_complete_one_generation_at_a_time(&s, worker, name, uid).await;
        assert_eq!(
            done.annotations()
                .get(MIRRORS_LOST_ANNOTATION)
                .map(String::as_str),
            Some("1")
        );
        wait_annotation(&s, name, DISPATCH_WAITING_ANNOTATION, |v| v.is_none()).await;
        s.wait_event(name, "DispatchWaiting").await;
    }
    s.finish(WAIT).await;
}

async fn lose_and_rerun(s: &Scenario, name: &str, policy: PropagationPolicy) {
    let uid = s.create(s.job(name).run_for(RUN_FOR)).await;
    let worker = s.assigned_worker(name).await;
    let first = running_mirror(s, worker, name, None).await;
    delete_mirror(s, worker, name, policy).await;

    wait_remains_gone(s, worker, &uid, &first).await;
    let second = running_mirror(s, worker, name, Some(&first)).await;
    assert_ne!(first, second);
    let done = wait_complete_one_generation_at_a_time(s, worker, name, &uid).await;

    assert_eq!(
        done.annotations()
            .get(MIRRORS_LOST_ANNOTATION)
            .map(String::as_str),
        Some("1")
    );
    let status = done.status.expect("status");
    assert_eq!(
        status.succeeded,
        Some(1),
        "{name}: the re-run's success is shown"
    );
    assert_eq!(status.active.unwrap_or(0), 0);
    let note = s.wait_event(name, "RemoteJobLost").await;
    assert!(
        note.contains(&worker.name) && note.contains("attempt 2 of 3"),
        "{note}"
    );
}
