//! A worker's kube-apiserver restarted under load: nothing lost.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_api_server_restarted_under_load_loses_nothing() {
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("apiserver-restart").await;
    let worker = scenario.worker(WORKER_A);
    let mut expected = BTreeMap::new();
    for i in 0..20 {
        let name = format!("load-{i}");
        let job = scenario
            .job(&name)
            .label(CLUSTER_KEY, WORKER_A)
            .run_for("3s");
        scenario.create(job).await;
        expected.insert(name, "Complete");
    }
    for i in 0..4 {
        let name = format!("deleted-{i}");
        let job = scenario
            .job(&name)
            .label(CLUSTER_KEY, WORKER_A)
            .run_for("600s");
        scenario.create(job).await;
    }
    scenario.wait_mirrors(1, TIMEOUT).await;
    // The API server goes away while the agent applies and watches.
    scenario
        .clusters
        .restart(&format!("{}-kube-apiserver", worker.name))
        .unwrap();
    for i in 0..4 {
        scenario
            .jobs
            .delete(&format!("deleted-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    let client = kit::client(worker).await;
    wait::until("the restarted API server serving", TIMEOUT, || async {
        match client.apiserver_version().await {
            Ok(_) => Seen::Ready(()),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    scenario.wait_outcomes(&expected, TIMEOUT).await;
    scenario.assert_created_at_most(1);
    scenario.finish(TIMEOUT).await;
}
