//! jobrelay itself in a test: the manager and one agent per worker cluster,
//! run as their real binaries (built by cargo on first use) against a
//! [`ClusterSet`](crate::cluster::ClusterSet), talking over loopback.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;

use crate::certs::RelayCa;
use proxy::Proxy;

pub mod binaries;
pub mod election;
pub mod proxy;
pub mod registration;

mod control;
mod impostor;
mod reports;
mod start;

pub(crate) use control::start_logged;
pub use impostor::Impostor;
pub use start::Options;
use start::{AgentSetup, Replica};

pub(crate) use reports::http_get;
pub use reports::{SESSION_OPEN, agent_connected, inventory_in, metric_in, serving_status};

/// The manager identity the tests run with.
pub const ORIGIN: &str = "e2e";

/// A running manager and its agents; the processes die with the test
/// process. Either can be killed and started again.
pub struct Relay {
    pub origin: String,
    /// `https://127.0.0.1:<port>` of the manager's Relay service.
    pub manager_url: String,
    /// `127.0.0.1:<port>` of the manager's `/metrics`.
    pub metrics_addr: String,
    /// `127.0.0.1:<port>` of the manager's health service.
    pub health_addr: String,
    ca: RelayCa,
    ca_path: PathBuf,
    tls_dir: PathBuf,
    logs: PathBuf,
    agent_bin: PathBuf,
    /// Replica 0 is "the manager" of the methods without an index.
    replicas: Vec<Replica>,
    agent_setups: BTreeMap<String, AgentSetup>,
    agent_args: Vec<String>,
    agents: Mutex<BTreeMap<String, Child>>,
    log_filter: String,
}

impl Relay {
    /// The proxy between `worker`'s agent and the manager (with
    /// [`Options::proxied`]).
    pub fn link(&self, worker: &str) -> Option<&Proxy> {
        self.agent_setups.get(worker)?.proxy.as_ref()
    }

    /// `127.0.0.1:<port>` of the health service of the agent of `worker`.
    pub fn agent_health_addr(&self, worker: &str) -> Option<&str> {
        self.agent_setups
            .get(worker)
            .map(|s| s.health_addr.as_str())
    }

    /// Where the client certificate and key of `worker`'s agent are read from.
    pub fn agent_certificate_files(&self, worker: &str) -> Option<(&Path, &Path)> {
        self.agent_setups
            .get(worker)
            .map(|s| (s.cert.as_path(), s.key.as_path()))
    }

    /// `https://127.0.0.1:<port>` of every replica's Relay service, as an
    /// agent is given them.
    pub fn manager_urls(&self) -> Vec<String> {
        self.replicas.iter().map(|r| r.url.clone()).collect()
    }

    /// The CA that signed the relay's certificates.
    pub fn ca(&self) -> &RelayCa {
        &self.ca
    }

    /// The manager's `--client-ca` file (the agents' `--manager-ca` too).
    pub fn ca_path(&self) -> &Path {
        &self.ca_path
    }

    /// A folder for a test's own certificate files.
    pub fn tls_dir(&self) -> &Path {
        &self.tls_dir
    }
}

impl Drop for Relay {
    /// Stops the manager and the agents (a Relay that failed to start must
    /// not leave them running beside the next one).
    fn drop(&mut self) {
        for index in 0..self.replicas.len() {
            let _ = self.signal_replica(index, libc::SIGCONT);
            self.kill_replica(index);
        }
        let workers: Vec<String> = lock(&self.agents).keys().cloned().collect();
        for worker in workers {
            self.kill_agent(&worker);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
