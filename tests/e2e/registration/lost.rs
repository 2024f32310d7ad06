//! A Lost cluster: the manager releases the Jobs deleted while it was
//! gone, and its agent, back, cleans their mirrors up.

use super::*;

/// The mirror Job of `uid` on a worker, with its Pods.
async fn mirror_objects(worker: &kube::Client, ns: &str, uid: &str) -> (usize, usize) {
    let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
    let jobs: Api<Job> = Api::namespaced(worker.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(worker.clone(), ns);
    let jobs = jobs
        .list(&selector)
        .await
        .map(|l| l.items.len())
        .unwrap_or(usize::MAX);
    let pods = pods
        .list(&selector)
        .await
        .map(|l| l.items.len())
        .unwrap_or(usize::MAX);
    (jobs, pods)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_cluster_releases_deleted_jobs_and_its_returning_agent_cleans_up() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (clusters, relay, registrations) = setup().await;
    let scenario = Scenario::new(clusters, relay, "lost").await;
    let (ns, jobs) = (scenario.ns.clone(), scenario.jobs.clone());
    let manager = kit::client(clusters.manager()).await;
    let worker_a = clusters
        .workers()
        .iter()
        .find(|w| w.name == WORKER_A)
        .unwrap();
    let worker_a_client = kit::client(worker_a).await;

    // A long Job running on worker-1.
    let job = scenario
        .job("stranded")
        .label(CLUSTER_KEY, WORKER_A)
        .run_for("600s")
        .build();
    let uid = jobs
        .create(&PostParams::default(), &job)
        .await
        .unwrap()
        .uid()
        .unwrap();
    wait::until("the mirror's Pod on worker-1", TIMEOUT, || async {
        match mirror_objects(&worker_a_client, &ns, &uid).await {
            (1, pods) if pods >= 1 && pods != usize::MAX => Seen::Ready(()),
            seen => Seen::Waiting(format!("{seen:?} (Jobs, Pods)")),
        }
    })
    .await;

    // The agent goes away; the Job is deleted while it is away.
    set_spec(
        &registrations,
        WORKER_A,
        serde_json::json!({"lostAfter": "20s"}),
    )
    .await;
    relay.kill_agent(WORKER_A);
    jobs.delete("stranded", &DeleteParams::default())
        .await
        .unwrap();
    let lost = wait_condition(&registrations, WORKER_A, "Lost", "True").await;
    println!("worker-1 Lost {lost:?} after the agent was killed (lostAfter 20s)");

    // The finalizer is released so the namespace could go, with a warning.
    wait::until("the manager Job released and gone", TIMEOUT, || async {
        match jobs.get_opt("stranded").await {
            Ok(None) => Seen::Ready(()),
            Ok(Some(job)) => Seen::Waiting(format!("finalizers {:?}", job.finalizers())),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    assert!(events_with_reason(&manager, &ns, "stranded", "ClusterLost").await >= 1);
    let (left_jobs, _) = mirror_objects(&worker_a_client, &ns, &uid).await;
    assert_eq!(
        left_jobs, 1,
        "with its agent away, the mirror is still on worker-1"
    );

    // While worker-1 is Lost, an unpinned Job goes elsewhere and a Job
    // pinned to it is deactivated.
    let elsewhere = scenario.job("elsewhere").run_for("1s").build();
    jobs.create(&PostParams::default(), &elsewhere)
        .await
        .unwrap();
    let pinned = scenario
        .job("pinned-to-lost")
        .label(CLUSTER_KEY, WORKER_A)
        .build();
    jobs.create(&PostParams::default(), &pinned).await.unwrap();
    wait::until("placement around the Lost cluster", TIMEOUT, || async {
        let elsewhere = jobs.get("elsewhere").await.ok();
        let pinned = jobs.get("pinned-to-lost").await.ok();
        let placed = elsewhere
            .as_ref()
            .and_then(|j| j.annotations().get(CLUSTER_KEY).cloned());
        let deactivated = pinned
            .as_ref()
            .is_some_and(|j| j.annotations().contains_key(DEACTIVATED_ANNOTATION));
        if placed.as_deref() == Some(WORKER_B) && deactivated {
            Seen::Ready(())
        } else {
            Seen::Waiting(format!(
                "elsewhere on {placed:?}, pinned deactivated {deactivated}"
            ))
        }
    })
    .await;
    let pinned = jobs.get("pinned-to-lost").await.unwrap();
    assert!(
        pinned.annotations().get(CLUSTER_KEY).is_none(),
        "nothing was sent to the Lost cluster"
    );

    // The agent returns: its DesiredSet no longer lists the mirror, and the
    // sweep deletes it and its Pods.
    let sessions = relay.sessions_opened(WORKER_A);
    relay.start_agent(WORKER_A).unwrap();
    relay.wait_sessions(WORKER_A, sessions + 1).await.unwrap();
    wait_condition(&registrations, WORKER_A, "Lost", "False").await;
    wait::until(
        "the stranded mirror and its Pods gone from worker-1",
        TIMEOUT,
        || async {
            match mirror_objects(&worker_a_client, &ns, &uid).await {
                (0, 0) => Seen::Ready(()),
                seen => Seen::Waiting(format!("{seen:?} (Jobs, Pods)")),
            }
        },
    )
    .await;
    set_spec(
        &registrations,
        WORKER_A,
        serde_json::json!({"lostAfter": null}),
    )
    .await;

    scenario.finish(TIMEOUT).await;
}
