//! Placement by room, on real clusters whose kwok nodes have finite room
//! and whose real kube-scheduler does the fitting: the agents report each
//! worker's room by node pool, the manager places a Job only where its
//! Pods fit, and a Job that fits nowhere waits on the manager, saying why,
//! until room appears; a mirror whose Pods find no node on its worker
//! moves to one where they do. Each test takes both workers' room in turns
//! (`FiniteRoom`: the default 1k-CPU node cordoned), builds its fleet of
//! pools, and ends with every Job deleted and the leak check at zero.

#[path = "placement/burst.rs"]
mod burst;
#[path = "placement/fits.rs"]
mod fits;
#[path = "placement/stuck.rs"]
mod stuck;
#[path = "placement/waits.rs"]
mod waits;

use std::time::Duration;

use jobrelay_e2e::scenario::Scenario;
use jobrelay_manager::clusters::worker_cluster::{PoolStatus, WorkerCluster};
use jobrelay_testbed::cluster::pools::{GPU, NodePool, POOL_LABEL};
use jobrelay_testbed::cluster::room::FiniteRoom;
use jobrelay_testbed::kit;
use jobrelay_testbed::relay::Options;
use jobrelay_testbed::wait::{self, Seen};
use kube::api::Api;

const WORKERS: usize = 2;
const TIMEOUT: Duration = Duration::from_secs(120);

/// A fleet of finite room: the scenario, and each worker's room in turn.
struct Fleet {
    scenario: Scenario,
    rooms: Vec<FiniteRoom>,
}

/// Two 4-CPU nodes.
fn small(name: &str) -> NodePool {
    NodePool::new(name, 2).cpu("4").memory("16Gi")
}

/// One 16-CPU node with four GPUs, tainted for GPU Pods.
fn gpus(name: &str) -> NodePool {
    NodePool::new(name, 1)
        .cpu("16")
        .memory("64Gi")
        .gpus(4)
        .taint(GPU, "present", "NoSchedule")
}

impl Fleet {
    /// Takes both workers' room (worker-1 first, as every test does) and
    /// gives each the pools `per_worker` lists; waits until the manager
    /// shows each worker's pools.
    async fn start(prefix: &str, per_worker: [Vec<NodePool>; WORKERS]) -> Fleet {
        let (clusters, relay) = kit::relay_with(WORKERS, Options::default()).await;
        let mut rooms = Vec::new();
        for (worker, pools) in clusters.workers().iter().zip(&per_worker) {
            let mut room = FiniteRoom::take(worker).await.expect("finite room");
            for pool in pools {
                room.add_pool(pool).await.expect("add a pool");
            }
            rooms.push(room);
        }
        let fleet = Fleet {
            scenario: Scenario::new(clusters, relay, prefix).await,
            rooms,
        };
        for (worker, pools) in clusters.workers().iter().zip(&per_worker) {
            let mut names: Vec<&str> = pools.iter().map(NodePool::name).collect();
            names.sort_unstable();
            fleet
                .wait_room(&worker.name, |room| pool_names(room) == names)
                .await;
        }
        fleet
    }

    /// Waits until the manager shows `worker`'s room as `expected` says.
    async fn wait_room(&self, worker: &str, expected: impl Fn(&[PoolStatus]) -> bool) {
        let clusters: Api<WorkerCluster> =
            Api::all(kit::client(self.scenario.clusters.manager()).await);
        wait::until(
            format!("the manager shows {worker}'s room"),
            TIMEOUT,
            || async {
                match clusters.get(worker).await {
                    Ok(cluster) => {
                        let room = cluster.status.and_then(|s| s.room).unwrap_or_default();
                        match expected(&room) {
                            true => Seen::Ready(()),
                            false => Seen::Waiting(format!("{room:?}")),
                        }
                    }
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await;
    }

    /// Deletes every Job, runs the leak check, and gives the room back.
    async fn finish(self) {
        self.scenario.finish(TIMEOUT).await;
        for room in self.rooms {
            room.give_back().await.expect("give the room back");
        }
    }
}

/// The kit's names of the pools the manager shows, in order (schedulable
/// nodes only: a cordoned pool is not shown).
fn pool_names(room: &[PoolStatus]) -> Vec<&str> {
    let mut names: Vec<&str> = room
        .iter()
        .filter_map(|pool| pool.labels.get(POOL_LABEL).map(String::as_str))
        .collect();
    names.sort_unstable();
    names
}

/// The free CPU the manager shows in `worker`'s pool `name`, as a quantity.
fn free_cpu<'a>(room: &'a [PoolStatus], name: &str) -> Option<&'a str> {
    room.iter()
        .find(|pool| pool.labels.get(POOL_LABEL).map(String::as_str) == Some(name))
        .and_then(|pool| pool.free.get("cpu"))
        .map(String::as_str)
}

/// The cluster the manager Job `name` was placed on, if any.
async fn placed_on(scenario: &Scenario, name: &str) -> Option<String> {
    let job = scenario.jobs.get(name).await.expect("the manager Job");
    job.metadata
        .annotations
        .and_then(|a| a.get(jobrelay_proto::wire::CLUSTER_KEY).cloned())
}
