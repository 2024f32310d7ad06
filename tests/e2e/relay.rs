//! The relay end to end: one manager cluster, two workers, `jobrelay-manager`
//! and two `jobrelay-agent`s running as their real binaries. Every scenario
//! ends with the leak check over all workers.

#[path = "relay/observability.rs"]
mod observability;
#[path = "relay/stuck_pods.rs"]
mod stuck_pods;

use jobrelay_e2e::scenario::{Scenario, WAIT as TIMEOUT, has_condition};
use jobrelay_proto::wire::{CLUSTER_KEY, ORIGIN_LABEL, ORIGIN_UID_LABEL, REMOTE_CLEANUP_FINALIZER};
use jobrelay_testbed::objects::leaks::assert_no_leaks;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};

#[tokio::test]
async fn a_job_runs_on_a_worker_completes_and_leaves_nothing_behind() {
    let s = Scenario::relayed("complete").await;
    let uid = s
        .create(s.job("short").run_for("4s").terminate_after("2s"))
        .await;
    let worker = s.assigned_worker("short").await;

    let mirror = s.worker_api::<Job>(&worker.name).await;
    let mirrored = wait::until("mirror Job on its worker", TIMEOUT, || async {
        match mirror.get_opt("short").await {
            Ok(Some(job)) => Seen::Ready(job),
            Ok(None) => Seen::Waiting("not there".into()),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    assert_eq!(mirrored.labels().get(ORIGIN_LABEL), Some(&s.relay.origin));
    assert_eq!(mirrored.labels().get(ORIGIN_UID_LABEL), Some(&uid));
    assert!(
        mirrored.spec.as_ref().unwrap().managed_by.is_none(),
        "the worker's own Job controller runs the mirror"
    );

    let done = s.wait_condition("short", "Complete").await;
    let status = done.status.expect("status");
    assert_eq!(status.succeeded, Some(1));
    assert!(status.start_time.is_some() && status.completion_time.is_some());
    let conditions: Vec<&str> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(
        conditions,
        ["SuccessCriteriaMet", "Complete"],
        "the worker's condition order"
    );

    // Retention is 0s: the mirror goes, and the finalizer only once its Pods are gone.
    s.wait_released("short").await;
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
    let job = s
        .jobs
        .get("short")
        .await
        .expect("a finished manager Job stays");
    assert!(has_condition(&job, "Complete"));
    let reasons: Vec<String> = s
        .events("short")
        .await
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    for reason in [
        "Dispatched",
        "RemoteFinished",
        "RemoteCleanupStarted",
        "RemotePodsGone",
    ] {
        assert!(
            reasons.iter().any(|r| r == reason),
            "Event {reason} recorded, got {reasons:?}"
        );
    }
    s.finish(TIMEOUT).await;
}

#[tokio::test]
async fn a_failing_job_fails_on_the_manager_with_the_workers_reason() {
    let s = Scenario::relayed("failing").await;
    s.create(s.job("broken").failing().backoff_limit(1)).await;
    let failed = s.wait_condition("broken", "Failed").await;
    let status = failed.status.expect("status");
    assert_eq!(status.failed, Some(2), "backoffLimit 1: two Pods failed");
    let reason = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Failed")
        .and_then(|c| c.reason.clone());
    assert_eq!(reason.as_deref(), Some("BackoffLimitExceeded"));
    s.wait_released("broken").await;
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
    s.finish(TIMEOUT).await;
}

#[tokio::test]
async fn deleting_a_running_job_removes_its_pods_before_the_manager_job_goes() {
    let s = Scenario::relayed("delete").await;
    let uid = s
        .create(
            s.job("long")
                .run_for("1h")
                .parallelism(2, 2)
                .terminate_after("4s"),
        )
        .await;
    let worker = s.assigned_worker("long").await;
    s.wait_worker_pods(worker, &uid, 2, "Running").await;

    s.jobs
        .delete("long", &DeleteParams::default())
        .await
        .expect("delete manager Job");
    // The Pods are Terminating on the worker while the manager Job still waits for them.
    s.wait_worker_pods(worker, &uid, 2, "Running+Terminating")
        .await;
    let waiting = s
        .jobs
        .get_opt("long")
        .await
        .expect("get")
        .expect("the manager Job outlives its Pods");
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert!(
        waiting
            .finalizers()
            .iter()
            .any(|f| f == REMOTE_CLEANUP_FINALIZER)
    );

    s.wait_gone("long").await;
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
}

#[tokio::test]
async fn jobs_deleted_while_their_mirrors_are_being_created_leave_nothing_behind() {
    let s = Scenario::relayed("quick-delete").await;
    let names: Vec<String> = (0..30).map(|i| format!("brief-{i}")).collect();
    futures::future::join_all(names.iter().map(|name| s.create(s.job(name).run_for("1h")))).await;
    // Deleted at once: some before dispatch, some while the agent's create
    // is still out, some after their mirror exists.
    let jobs = &s.jobs;
    futures::future::join_all(names.iter().map(|name| async move {
        jobs.delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("deleting manager Job {name}: {e}"))
    }))
    .await;
    for name in &names {
        s.wait_gone(name).await;
    }
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
}

#[tokio::test]
async fn a_suspended_job_suspends_its_mirror_and_shows_its_pods_until_they_are_gone() {
    let s = Scenario::relayed("suspend").await;
    // Pods take 4 s to terminate on the worker, so "still going" is observable.
    let uid = s
        .create(s.job("pausable").run_for("1h").terminate_after("4s"))
        .await;
    let worker = s.assigned_worker("pausable").await;
    s.wait_worker_pods(worker, &uid, 1, "Running").await;
    let mirror = s.worker_api::<Job>(&worker.name).await;
    let mirror_uid = mirror.get("pausable").await.expect("mirror").uid();

    let suspend = |value: bool| Patch::Merge(serde_json::json!({"spec": {"suspend": value}}));
    s.jobs
        .patch("pausable", &PatchParams::default(), &suspend(true))
        .await
        .expect("suspend");
    wait::until("the mirror suspended on the worker", TIMEOUT, || async {
        match mirror.get_opt("pausable").await {
            Ok(Some(job)) if job.spec.as_ref().and_then(|s| s.suspend) == Some(true) => {
                Seen::Ready(())
            }
            other => Seen::Waiting(format!("{other:?}")),
        }
    })
    .await;
    // Until the worker's Pod is gone, the manager Job counts it as active.
    let pods = s.worker_api::<Pod>(&worker.name).await;
    let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
    let seen_active_while_pod_remained = std::cell::Cell::new(false);
    wait::until(
        "the worker's Pod gone and the manager Job showing 0 active",
        TIMEOUT,
        || async {
            let remaining = pods
                .list(&selector)
                .await
                .map(|l| l.items.len())
                .unwrap_or(1);
            let job = s.jobs.get("pausable").await.expect("get");
            let active = job.status.as_ref().and_then(|st| st.active).unwrap_or(0);
            assert!(
                active > 0 || remaining == 0,
                "the manager Job shows active 0 while {remaining} Pod(s) remain on the worker"
            );
            if active > 0 && remaining > 0 {
                seen_active_while_pod_remained.set(true);
            }
            let start = job.status.as_ref().and_then(|st| st.start_time.as_ref());
            match (remaining, active, start) {
                (0, 0, None) => Seen::Ready(()),
                _ => Seen::Waiting(format!(
                    "{remaining} Pods, active {active}, startTime {start:?}"
                )),
            }
        },
    )
    .await;
    assert!(
        seen_active_while_pod_remained.get(),
        "the terminating Pod was shown as active on the manager Job"
    );
    let held = s.jobs.get("pausable").await.expect("get");
    assert!(
        held.finalizers()
            .iter()
            .any(|f| f == REMOTE_CLEANUP_FINALIZER),
        "a suspended Job stays held"
    );

    s.jobs
        .patch("pausable", &PatchParams::default(), &suspend(false))
        .await
        .expect("resume");
    s.wait_worker_pods(worker, &uid, 1, "Running").await;
    assert_eq!(
        mirror.get("pausable").await.expect("mirror").uid(),
        mirror_uid,
        "the same mirror Job resumed, not a new one"
    );
    assert_eq!(
        s.assigned_worker("pausable").await.name,
        worker.name,
        "the cluster is set once, never moved"
    );
    s.finish(TIMEOUT).await;
}

#[tokio::test]
async fn pinned_jobs_go_where_pinned_and_others_spread() {
    let s = Scenario::relayed("placement").await;
    s.create(s.job("pinned").label(CLUSTER_KEY, "worker-2").run_for("1h"))
        .await;
    assert_eq!(s.assigned_worker("pinned").await.name, "worker-2");

    // Each asks 50 of the 1k CPUs a worker's fake Node has, which no other
    // test of this target asks for: after each placement the other worker
    // has the more CPU left, whatever Pods other tests run meanwhile.
    let mut placed = Vec::new();
    for i in 0..10 {
        let name = format!("spread-{i}");
        s.create(s.job(&name).cpu("50").run_for("1h")).await;
        placed.push(s.assigned_worker(&name).await.name.clone());
    }
    for worker in ["worker-1", "worker-2"] {
        assert!(
            placed.iter().any(|p| p == worker),
            "some unpinned Job went to {worker}: {placed:?}"
        );
    }
    s.finish(TIMEOUT).await;
}

#[tokio::test]
async fn parallel_jobs_report_the_right_counts() {
    let s = Scenario::relayed("parallel").await;
    s.create(s.job("wide").parallelism(5, 10).run_for("1s"))
        .await;
    let done = s.wait_condition("wide", "Complete").await;
    let status = done.status.expect("status");
    assert_eq!(status.succeeded, Some(10));
    assert_eq!(status.failed.unwrap_or(0), 0);
    s.wait_released("wide").await;
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
    s.finish(TIMEOUT).await;
}
