//! The agent SIGKILLed at the worst moments — while applying, while a
//! suspended Job's mirror waits, with its worker streaming or paging lists,
//! while Pods terminate — ends with each mirror created once and every Pod
//! confirmed gone.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_killed_while_applying_creates_each_mirror_once() {
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("agent-applying").await;
    let relay = scenario.relay;
    let expected = scenario.create_jobs("apply", 12, "2s").await;
    // The agents are applying the burst right now.
    scenario.wait_mirrors(1, TIMEOUT).await;
    for worker in scenario.clusters.workers() {
        relay.kill_agent(&worker.name);
    }
    for worker in scenario.clusters.workers() {
        relay.restart_agent(&worker.name).await.unwrap();
    }
    scenario.wait_outcomes(&expected, TIMEOUT).await;
    scenario.assert_created_at_most(1);
    scenario.finish(TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_suspended_jobs_mirror_survives_an_agent_restart_and_resumes() {
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("agent-suspended").await;
    let relay = scenario.relay;
    let uid = scenario
        .create(scenario.job("paused").run_for("1h").terminate_after("1s"))
        .await;
    let worker = scenario.assigned_worker("paused").await;
    scenario.wait_worker_pods(worker, &uid, 1, "Running").await;
    let mirrors: Api<Job> = scenario.worker_api(&worker.name).await;
    let first = mirrors.get("paused").await.expect("the mirror").uid();
    let suspend =
        |value: bool| kube::api::Patch::Merge(serde_json::json!({"spec": {"suspend": value}}));
    let params = kube::api::PatchParams::default();
    scenario
        .jobs
        .patch("paused", &params, &suspend(true))
        .await
        .expect("suspend");
    scenario.wait_worker_pods(worker, &uid, 0, "").await;
    // The agent comes back to a desired set that must still hold the
    // suspended Job: its orphan sweep would otherwise delete the mirror.
    relay.kill_agent(&worker.name);
    relay.restart_agent(&worker.name).await.unwrap();
    scenario
        .jobs
        .patch("paused", &params, &suspend(false))
        .await
        .expect("resume");
    scenario.wait_worker_pods(worker, &uid, 1, "Running").await;
    let resumed = mirrors.get("paused").await.expect("the mirror").uid();
    assert_eq!(
        resumed, first,
        "the suspended mirror was kept, not made again"
    );
    scenario.assert_created_at_most(1);
    scenario.finish(TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_agent_holds_its_mirrors_whether_its_worker_streams_lists_or_pages_them() {
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("lists").await;
    let relay = scenario.relay;
    // worker-1's API server streams initial lists; PAGED_LISTS_ONLY's
    // refuses them, as a Kubernetes 1.33 server does by default.
    let workers = [WORKER_A, PAGED_LISTS_ONLY];
    let mut held = Vec::new();
    for worker in workers {
        let name = format!("on-{worker}");
        let uid = scenario
            .create(
                scenario
                    .job(&name)
                    .label(CLUSTER_KEY, worker)
                    .run_for("1h")
                    .terminate_after("1s"),
            )
            .await;
        let cluster = scenario.worker(worker);
        scenario.wait_worker_pods(cluster, &uid, 1, "Running").await;
        let mirrors: Api<Job> = scenario.worker_api(worker).await;
        held.push((
            worker,
            name.clone(),
            mirrors.get(&name).await.expect("mirror").uid(),
        ));
    }
    for worker in workers {
        relay.kill_agent(worker);
        relay.restart_agent(worker).await.unwrap();
        let log = relay.agent_log(worker);
        let inventory = log.lines().rev().find_map(inventory_in);
        assert!(
            inventory.is_some_and(|n| n >= 1),
            "the agent of {worker} opened its session with its caches filled: {inventory:?}"
        );
        let refused = log.contains("refused a streamed list");
        assert_eq!(
            refused,
            worker == PAGED_LISTS_ONLY,
            "the agent of {worker} fell back to paged lists only where they were refused"
        );
    }
    for (worker, name, first) in held {
        let mirrors: Api<Job> = scenario.worker_api(worker).await;
        let now = mirrors.get(&name).await.expect("mirror").uid();
        assert_eq!(
            now, first,
            "the mirror on {worker} was kept, not made again"
        );
    }
    scenario.assert_created_at_most(1);
    scenario.finish(TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_killed_during_deletion_still_confirms_every_pod_gone() {
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("agent-deleting").await;
    let relay = scenario.relay;
    // Pods that take a while to terminate, pinned to one worker.
    let mut uids = Vec::new();
    for i in 0..4 {
        let job = scenario
            .job(&format!("slow-{i}"))
            .label(CLUSTER_KEY, WORKER_A)
            .run_for("600s")
            .terminate_after("6s");
        uids.push(scenario.create(job).await);
    }
    let pods: Api<Pod> = scenario.worker_api(WORKER_A).await;
    wait::until("every Pod running", TIMEOUT, || async {
        let list = pods.list(&ListParams::default()).await;
        let running = list.map(|l| {
            l.items
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count()
        });
        match running {
            Ok(4) => Seen::Ready(()),
            other => Seen::Waiting(format!("{other:?} running")),
        }
    })
    .await;

    // Two are deleted and the agent dies while their Pods terminate; the
    // other two are deleted while it is dead.
    for i in 0..2 {
        scenario
            .jobs
            .delete(&format!("slow-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    wait::until("Pods terminating", TIMEOUT, || async {
        let list = pods.list(&ListParams::default()).await;
        match list.map(|l| {
            l.items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_some())
                .count()
        }) {
            Ok(n) if n >= 1 => Seen::Ready(()),
            other => Seen::Waiting(format!("{other:?} terminating")),
        }
    })
    .await;
    relay.kill_agent(WORKER_A);
    for i in 2..4 {
        scenario
            .jobs
            .delete(&format!("slow-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    relay.restart_agent(WORKER_A).await.unwrap();
    scenario.finish(TIMEOUT).await;
}
