//! A cluster with finite room for one test: the default Node (1k CPUs) is
//! cordoned, the test adds node pools, and everything is put back at the
//! end — pools removed, the default Node schedulable again.
//!
//! The tests of a process share their clusters, so finite room is taken in
//! turns: [`FiniteRoom::take`] waits while another test holds the same
//! cluster. Tests that do not take it may still run on that cluster and
//! would find their Pods Pending while the default Node is cordoned, so
//! finite-room tests use a cluster the other tests of their process leave
//! alone (e.g. a worker when the others use the manager).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::OwnedMutexGuard;

use crate::cluster::pools::{self, NodePool};
use crate::cluster::{ClusterInfo, Error, NODE};

/// One test's finite room on one cluster; [`FiniteRoom::give_back`] ends it.
/// Dropped without that (a failed test), it puts things back from a thread
/// of its own.
pub struct FiniteRoom {
    cluster: ClusterInfo,
    client: kube::Client,
    pools: Vec<NodePool>,
    given_back: bool,
    _turn: OwnedMutexGuard<()>,
}

impl FiniteRoom {
    /// Waits for this test's turn on `cluster`, then cordons the default
    /// Node so only pools the test adds take Pods.
    pub async fn take(cluster: &ClusterInfo) -> Result<Self, Error> {
        let turn = turn_of(&cluster.name).lock_owned().await;
        let client = cluster.client().await?;
        pools::cordon(&client, NODE)
            .await
            .map_err(|e| pool_error(cluster, e))?;
        Ok(FiniteRoom {
            cluster: cluster.clone(),
            client,
            pools: Vec::new(),
            given_back: false,
            _turn: turn,
        })
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Adds a pool's Nodes (Ready, with their declared room); they are
    /// removed by [`FiniteRoom::give_back`].
    pub async fn add_pool(&mut self, pool: &NodePool) -> Result<Vec<String>, Error> {
        self.pools.push(pool.clone());
        pools::add_pool(&self.client, pool)
            .await
            .map_err(|e| pool_error(&self.cluster, e))
    }

    /// Grows a pool added before by its Node `index`.
    pub async fn add_node(&mut self, pool: &NodePool, index: usize) -> Result<String, Error> {
        if !self.pools.contains(pool) {
            self.pools.push(pool.clone());
        }
        pools::add_node(&self.client, pool, index)
            .await
            .map_err(|e| pool_error(&self.cluster, e))
    }

    /// Removes the pools and makes the default Node schedulable again.
    pub async fn give_back(mut self) -> Result<(), Error> {
        self.given_back = true;
        put_back(&self.client, &self.pools)
            .await
            .map_err(|e| pool_error(&self.cluster, e))
    }
}

impl Drop for FiniteRoom {
    fn drop(&mut self) {
        if self.given_back {
            return;
        }
        // A test that failed drops its room inside its own runtime, which
        // cannot be blocked on; a client of a runtime of its own, on a
        // thread of its own, puts things back before the turn passes on.
        let (cluster, pools) = (self.cluster.clone(), std::mem::take(&mut self.pools));
        let outcome = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let client = cluster.client().await.map_err(|e| e.to_string())?;
                put_back(&client, &pools).await.map_err(|e| e.to_string())
            })
        })
        .join();
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("putting back the room of {}: {e}", self.cluster.name),
            Err(_) => eprintln!("putting back the room of {} panicked", self.cluster.name),
        }
    }
}

async fn put_back(client: &kube::Client, added: &[NodePool]) -> Result<(), pools::Error> {
    for pool in added {
        pools::remove_pool(client, pool).await?;
    }
    pools::uncordon(client, NODE).await
}

/// The turn of finite room on cluster `name`, one per cluster in this
/// process.
fn turn_of(name: &str) -> Arc<tokio::sync::Mutex<()>> {
    static TURNS: OnceLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let turns = TURNS.get_or_init(Mutex::default);
    let mut turns = turns
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    turns.entry(name.to_string()).or_default().clone()
}

fn pool_error(cluster: &ClusterInfo, error: pools::Error) -> Error {
    Error::Pools {
        cluster: cluster.name.clone(),
        source: error,
    }
}
