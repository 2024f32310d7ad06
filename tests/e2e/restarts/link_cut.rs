//! The link between agent and manager black-holed and dropped past the
//! heartbeat timeout: noticed on the WorkerCluster, and healed.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_link_cut_past_the_heartbeat_timeout_is_noticed_and_heals() {
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("cut-link").await;
    let relay = scenario.relay;
    let registrations: Api<WorkerCluster> =
        Api::all(kit::client(scenario.clusters.manager()).await);
    let link = relay.link(WORKER_A).expect("agents dial through proxies");

    for (mode, name) in [(Mode::BlackHole, "black-holed"), (Mode::Drop, "dropped")] {
        let sessions = relay.sessions_opened(WORKER_A);
        let cut = Instant::now();
        link.set(mode);
        let noticed = wait::until(format!("the {name} link noticed"), TIMEOUT, || async {
            let wc = registrations.get(WORKER_A).await;
            match wc.as_ref().ok().and_then(|wc| wc.condition("Connected")) {
                Some(c) if c.status == "False" => Seen::Ready(cut.elapsed()),
                other => Seen::Waiting(format!("{other:?}")),
            }
        })
        .await;
        println!("{name} link: Connected=False after {noticed:?} (heartbeat 1s)");
        // A Job pinned to the cut-off cluster waits, then runs once the link is back.
        let job = scenario
            .job(&format!("{}-during-cut", name))
            .label(CLUSTER_KEY, WORKER_A)
            .run_for("1s");
        scenario.create(job).await;
        link.set(Mode::Pass);
        relay.wait_sessions(WORKER_A, sessions + 1).await.unwrap();
    }
    let expected = BTreeMap::from([
        ("black-holed-during-cut".to_string(), "Complete"),
        ("dropped-during-cut".to_string(), "Complete"),
    ]);
    scenario.wait_outcomes(&expected, TIMEOUT).await;
    scenario.assert_created_at_most(1);
    scenario.finish(TIMEOUT).await;
}
