//! Placement by a WorkerCluster's namespace selector.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn placement_honours_the_namespace_selector() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (clusters, relay, registrations) = setup().await;
    let scenario = Scenario::new(clusters, relay, "selector").await;
    let (ns, jobs) = (scenario.ns.clone(), scenario.jobs.clone());
    let manager = kit::client(clusters.manager()).await;
    // worker-1 takes only namespaces of team b; this one is team a.
    let namespaces: Api<Namespace> = Api::all(manager.clone());
    let label = serde_json::json!({"metadata": {"labels": {"team": "a"}}});
    namespaces
        .patch(&ns, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    set_spec(
        &registrations,
        WORKER_A,
        serde_json::json!({"namespaceSelector": {"matchLabels": {"team": "b"}}}),
    )
    .await;
    // The manager's caches see both changes before the Jobs arrive.
    wait::until(
        "the manager's cache sees the new selector",
        TIMEOUT,
        || async {
            let probe = scenario.job("probe").label(CLUSTER_KEY, WORKER_A).build();
            let _ = jobs.create(&PostParams::default(), &probe).await;
            if events_with_reason(&manager, &ns, "probe", "Unplaceable").await > 0 {
                Seen::Ready(())
            } else {
                Seen::Waiting("no Unplaceable Event on the pinned probe yet".into())
            }
        },
    )
    .await;
    let probe = jobs.get("probe").await.unwrap();
    assert!(
        probe.annotations().get(CLUSTER_KEY).is_none(),
        "the pinned probe was not sent"
    );

    for i in 0..4 {
        let job = scenario.job(&format!("spread-{i}")).run_for("1s").build();
        jobs.create(&PostParams::default(), &job).await.unwrap();
    }
    let placed = wait::until("every Job placed", TIMEOUT, || async {
        let mut placed = Vec::new();
        for i in 0..4 {
            match jobs
                .get(&format!("spread-{i}"))
                .await
                .ok()
                .and_then(|j| j.annotations().get(CLUSTER_KEY).cloned())
            {
                Some(cluster) => placed.push(cluster),
                None => return Seen::Waiting(format!("{} placed", placed.len())),
            }
        }
        Seen::Ready(placed)
    })
    .await;
    assert!(
        placed.iter().all(|c| c == WORKER_B),
        "team a runs only where admitted: {placed:?}"
    );

    set_spec(
        &registrations,
        WORKER_A,
        serde_json::json!({"namespaceSelector": null}),
    )
    .await;
    scenario.finish(TIMEOUT).await;
}
