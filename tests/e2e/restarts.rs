//! Restart safety: the agent and the manager killed with SIGKILL at the worst
//! moments, and the link between them cut, end with every manager Job in its
//! right final state, no mirror created twice, and a clean leak check. Also
//! the agent's orphan sweep. These tests kill processes, so they run one at
//! a time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use jobrelay_e2e::cluster_config::PAGED_LISTS_ONLY;
use jobrelay_e2e::kit::{self, Clusters};
use jobrelay_e2e::proxy::Mode;
use jobrelay_e2e::relay::{Options, Relay};
use jobrelay_e2e::scenario::Scenario;
use jobrelay_e2e::wait::{self, Seen};
use jobrelay_manager::worker_cluster::WorkerCluster;
use jobrelay_proto::wire::{CLUSTER_KEY, ORIGIN_LABEL, ORIGIN_UID_LABEL};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

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

/// Restarts a killed agent and waits for its new session.
async fn restart_agent(relay: &Relay, worker: &str) {
    let sessions = relay.sessions_opened(worker);
    relay.start_agent(worker).unwrap();
    relay.wait_sessions(worker, sessions + 1).await.unwrap();
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

/// Waits until no Pod matches `selector`.
async fn wait_no_pods(pods: &Api<Pod>, selector: &ListParams, what: &str) {
    wait::until(what, TIMEOUT, || async {
        match pods.list(selector).await {
            Ok(list) if list.items.is_empty() => Seen::Ready(()),
            other => Seen::Waiting(format!("{:?} Pods", other.map(|l| l.items.len()))),
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
        restart_agent(relay, &worker.name).await;
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
    restart_agent(relay, &worker.name).await;
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
        restart_agent(relay, worker).await;
        let log = relay.agent_log(worker);
        let inventory = log
            .lines()
            .rev()
            .find_map(|l| l.split("session open inventory=").nth(1))
            .and_then(|n| n.split_whitespace().next()?.parse::<usize>().ok());
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
    restart_agent(relay, WORKER_A).await;
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
async fn the_orphan_sweep_deletes_only_this_origins_unwanted_objects() {
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("sweep").await;
    let relay = scenario.relay;
    let jobs: Api<Job> = scenario.worker_api(WORKER_A).await;
    let pods: Api<Pod> = scenario.worker_api(WORKER_A).await;

    // A mirror whose Job is deleted on the worker with --cascade=orphan,
    // leaving its Pod behind while the manager Job is deleted.
    let uid = scenario
        .create(
            scenario
                .job("orphaned")
                .label(CLUSTER_KEY, WORKER_A)
                .run_for("600s"),
        )
        .await;
    let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
    wait::until("the mirror's Pod", TIMEOUT, || async {
        match pods.list(&selector).await {
            Ok(list) if !list.items.is_empty() => Seen::Ready(()),
            other => Seen::Waiting(format!("{:?}", other.map(|l| l.items.len()))),
        }
    })
    .await;
    relay.kill_agent(WORKER_A);
    jobs.delete("orphaned", &DeleteParams::orphan())
        .await
        .unwrap();
    scenario
        .jobs
        .delete("orphaned", &DeleteParams::default())
        .await
        .unwrap();

    // Objects of this origin nobody wants, of another origin, and of none.
    let stray = |name: &str, origin: Option<&str>| {
        let mut job = jobrelay_e2e::fixtures::TestJob::new(&scenario.ns, name).run_for("600s");
        if let Some(origin) = origin {
            job = job
                .label(ORIGIN_LABEL, origin)
                .label(ORIGIN_UID_LABEL, &format!("stray-{name}"));
        }
        job.build()
    };
    for (name, origin) in [
        ("stray-ours", Some(relay.origin.as_str())),
        ("stray-other-origin", Some("another-manager")),
        ("stray-unlabelled", None),
    ] {
        jobs.create(&PostParams::default(), &stray(name, origin))
            .await
            .unwrap();
    }

    restart_agent(relay, WORKER_A).await;
    wait::until(
        "the orphaned Pod and this origin's stray Job gone",
        TIMEOUT,
        || async {
            let orphaned = pods.list(&selector).await.map(|l| l.items.len());
            let stray = jobs.get_opt("stray-ours").await.map(|j| j.is_some());
            match (orphaned, stray) {
                (Ok(0), Ok(false)) => Seen::Ready(()),
                seen => Seen::Waiting(format!("{seen:?} (orphaned Pods, stray Job present)")),
            }
        },
    )
    .await;
    // A stray of this origin that appears while connected goes on the next periodic sweep.
    jobs.create(
        &PostParams::default(),
        &stray("stray-later", Some(relay.origin.as_str())),
    )
    .await
    .unwrap();
    wait::until("the later stray Job swept", TIMEOUT, || async {
        match jobs.get_opt("stray-later").await {
            Ok(None) => Seen::Ready(()),
            other => Seen::Waiting(format!("{:?}", other.map(|j| j.map(|j| j.name_any())))),
        }
    })
    .await;
    for name in ["stray-other-origin", "stray-unlabelled"] {
        assert!(
            jobs.get_opt(name).await.unwrap().is_some(),
            "{name} must never be touched"
        );
        jobs.delete(name, &DeleteParams::background())
            .await
            .unwrap();
    }
    wait_no_pods(
        &pods,
        &ListParams::default(),
        "the untouched strays cleaned up by the test",
    )
    .await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hundreds_of_orphans_are_swept_at_a_steady_pace_with_progress_in_the_log() {
    use futures::StreamExt;
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("backlog").await;
    let relay = scenario.relay;
    let pods: Api<Pod> = scenario.worker_api(WORKER_A).await;
    let pod = |i: usize, origin: &str| Pod {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("left-{origin}-{i}")),
            labels: Some(BTreeMap::from([
                (ORIGIN_LABEL.to_string(), origin.to_string()),
                (ORIGIN_UID_LABEL.to_string(), format!("gone-{i}")),
            ])),
            ..Default::default()
        },
        spec: Some(jobrelay_e2e::fixtures::pod_spec()),
        ..Default::default()
    };
    // Pods of this origin whose Jobs the manager no longer knows, as a long
    // absence would leave them, and a few of another origin.
    let ours = 300;
    let progress_before = relay
        .agent_log(WORKER_A)
        .matches("working off a backlog")
        .count();
    let created: Vec<bool> = futures::stream::iter(0..ours)
        .map(|i| {
            let pods = pods.clone();
            let pod = pod(i, &relay.origin);
            async move { pods.create(&PostParams::default(), &pod).await.is_ok() }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(created.iter().all(|ok| *ok), "every orphan Pod created");
    for i in 0..3 {
        pods.create(&PostParams::default(), &pod(i, "another-manager"))
            .await
            .unwrap();
    }
    let swept = Instant::now();
    let selector = ListParams::default().labels(&format!("{ORIGIN_LABEL}={}", relay.origin));
    wait_no_pods(&pods, &selector, "every orphan Pod of this origin swept").await;
    println!(
        "{ours} orphan Pods swept within {:?} of their creation",
        swept.elapsed()
    );
    let progress = relay
        .agent_log(WORKER_A)
        .matches("working off a backlog")
        .count();
    assert!(
        progress > progress_before,
        "the backlog's progress is logged"
    );
    let other = pods
        .list(&ListParams::default().labels(&format!("{ORIGIN_LABEL}=another-manager")))
        .await
        .unwrap();
    assert_eq!(
        other.items.len(),
        3,
        "another origin's Pods are never touched"
    );
    for i in 0..3 {
        pods.delete(
            &format!("left-another-manager-{i}"),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
    }
    wait_no_pods(
        &pods,
        &ListParams::default(),
        "the other origin's Pods removed by the test",
    )
    .await;
    scenario.finish(TIMEOUT).await;
}
