//! The manager SIGKILLed at the worst moments — while dispatching, while
//! Jobs finish or are suspended, while holding finalizers — ends with each
//! Job on one cluster once, its final status copied and its finalizer
//! released after cleanup.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_manager_killed_while_dispatching_sends_each_job_to_one_cluster_once() {
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("manager-dispatching").await;
    let (clusters, relay) = (scenario.clusters, scenario.relay);
    let expected = scenario.create_jobs("dispatch", 16, "2s").await;
    scenario.wait_mirrors(1, TIMEOUT).await;
    relay.kill_manager();
    let rejoined = restart_manager(clusters, relay).await;
    println!("every agent rejoined the restarted manager within {rejoined:?}");
    assert_one_mirror_each_where_recorded(&scenario).await;
    scenario.wait_outcomes(&expected, TIMEOUT).await;
    scenario.assert_created_at_most(1);
    scenario.finish(TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_manager_killed_while_jobs_finish_copies_their_final_status_after_restart() {
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("manager-status").await;
    let (clusters, relay) = (scenario.clusters, scenario.relay);
    let expected = scenario.create_jobs("finish", 10, "4s").await;
    scenario.wait_mirrors(10, TIMEOUT).await;
    // The mirrors finish while the manager is away.
    relay.kill_manager();
    wait_mirrors_finished(&scenario, 10).await;
    restart_manager(clusters, relay).await;
    scenario.wait_outcomes(&expected, TIMEOUT).await;
    scenario.assert_created_at_most(1);
    scenario.finish(TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_suspended_while_the_manager_is_away_keep_the_outcome_their_mirrors_reached() {
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("late-suspend").await;
    let (clusters, relay) = (scenario.clusters, scenario.relay);
    let expected = scenario.create_jobs("late", 5, "2s").await;
    scenario.wait_mirrors(5, TIMEOUT).await;
    // The mirrors finish while the manager is away, and the Jobs are then
    // suspended: back, the manager sends a suspended revision of each to a
    // worker whose Job already finished.
    relay.kill_manager();
    wait_mirrors_finished(&scenario, 5).await;
    let suspend = kube::api::Patch::Merge(serde_json::json!({"spec": {"suspend": true}}));
    for name in expected.keys() {
        scenario
            .jobs
            .patch(name, &kube::api::PatchParams::default(), &suspend)
            .await
            .expect("suspend");
    }
    restart_manager(clusters, relay).await;
    scenario.wait_outcomes(&expected, TIMEOUT).await;
    scenario.assert_created_at_most(1);
    scenario.finish(TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_manager_killed_while_holding_finalizers_releases_them_after_cleanup() {
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("manager-finalizers").await;
    let (clusters, relay) = (scenario.clusters, scenario.relay);
    for i in 0..8 {
        scenario
            .create(
                scenario
                    .job(&format!("held-{i}"))
                    .run_for("600s")
                    .terminate_after("2s"),
            )
            .await;
    }
    scenario.wait_mirrors(8, TIMEOUT).await;
    for i in 0..8 {
        scenario
            .jobs
            .delete(&format!("held-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    relay.kill_manager();
    restart_manager(clusters, relay).await;
    scenario.finish(TIMEOUT).await;
}
