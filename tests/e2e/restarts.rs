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

#[path = "restarts/agent_killed.rs"]
mod agent_killed;
#[path = "restarts/api_server.rs"]
mod api_server;
#[path = "restarts/link_cut.rs"]
mod link_cut;
#[path = "restarts/manager_killed.rs"]
mod manager_killed;

#[path = "restarts/fenced.rs"]
mod fenced;
