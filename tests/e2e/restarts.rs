//! Restart safety: the agent and the manager killed with SIGKILL at the worst
//! moments, and the link between them cut, end with every manager Job in its
//! right final state, no mirror created twice, and a clean leak check. Also
//! the agent's orphan sweep. These tests kill processes, so they run one at
//! a time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use jobrelay_e2e::scenario::Scenario;
use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_proto::wire::CLUSTER_KEY;
use jobrelay_testbed::cluster::config::PAGED_LISTS_ONLY;
use jobrelay_testbed::kit::{self, Clusters};
use jobrelay_testbed::relay::proxy::Mode;
use jobrelay_testbed::relay::{Options, Relay, inventory_in};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};

const TIMEOUT: Duration = Duration::from_secs(120);
const WORKER_A: &str = "worker-1";

/// Only one test at a time kills processes or cuts links.
static EXCLUSIVE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn setup(prefix: &str) -> Scenario {
    let (clusters, relay) = relay().await;
    Scenario::new(clusters, relay, prefix).await
}

async fn relay() -> (&'static Clusters, &'static Relay) {
    let options = Options {
        proxied: true,
        ..Default::default()
    };
    kit::relay_with(2, options).await
}

/// Restarts a killed manager and waits until every agent is back.
async fn restart_manager(clusters: &Clusters, relay: &Relay) -> Duration {
    let before: Vec<usize> = clusters
        .workers()
        .iter()
        .map(|w| relay.sessions_opened(&w.name))
        .collect();
    let started = Instant::now();
    relay.start_manager().unwrap();
    for (worker, sessions) in clusters.workers().iter().zip(before) {
        relay
            .wait_sessions(&worker.name, sessions + 1)
            .await
            .unwrap();
    }
    started.elapsed()
}

/// Waits until `n` mirrors of the scenario finished on their workers.
async fn wait_mirrors_finished(scenario: &Scenario, n: usize) {
    wait::until("every mirror finished on its worker", TIMEOUT, || async {
        let mut finished = 0;
        for worker in scenario.clusters.workers() {
            let jobs: Api<Job> = Api::namespaced(kit::client(worker).await, &scenario.ns);
            if let Ok(list) = jobs.list(&ListParams::default()).await {
                finished += list
                    .items
                    .iter()
                    .filter(|j| jobrelay_e2e::scenario::outcome(j).is_some())
                    .count();
            }
        }
        match finished >= n {
            true => Seen::Ready(()),
            false => Seen::Waiting(format!("{finished} finished")),
        }
    })
    .await
}

/// Fails if a manager Job's mirror lives on another cluster than its
/// annotation names, or on two.
async fn assert_one_mirror_each_where_recorded(scenario: &Scenario) {
    let mirrors = scenario.mirrors().await.unwrap();
    let jobs = scenario.jobs.list(&ListParams::default()).await.unwrap();
    for job in jobs {
        let Some(uid) = job.uid() else { continue };
        let Some(held) = mirrors.get(&uid) else {
            continue;
        };
        let recorded = job.annotations().get(CLUSTER_KEY);
        assert_eq!(held.len(), 1, "{} has mirrors on {held:?}", job.name_any());
        assert_eq!(
            Some(&held[0]),
            recorded,
            "{} runs where it is not recorded",
            job.name_any()
        );
    }
}

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

#[path = "restarts/fenced.rs"]
mod fenced;
