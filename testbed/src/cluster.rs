//! The test clusters as every test reaches them: each cluster's name,
//! server and admin kubeconfig (`ClusterInfo`), the manager and its workers
//! as written to `clusters.json` (`ClusterSet`), and how reaching or
//! starting them fails. `running.rs` starts and stops them; `pools.rs` and
//! `room.rs` give a cluster Nodes of finite room.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{certs, wait};
use node::info::RealNodeInfo;

pub mod audit;
pub mod config;
pub mod down;
pub mod node;
pub mod pools;
pub mod ready;
pub mod room;
pub mod running;
pub mod supervisor;

/// Name of the manager cluster in a [`ClusterSet`].
pub const MANAGER: &str = "manager";
/// Name of the fake Node kwok runs in every cluster.
pub const NODE: &str = "kwok-node-0";
/// The annotation (value `fake`) of the Nodes kwok plays; it leaves every
/// other Node — a real node's — alone.
pub const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(180);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    #[error(transparent)]
    Certs(#[from] certs::Error),
    #[error(transparent)]
    Wait(#[from] wait::Timeout),
    #[error("connecting to cluster {cluster}: {source}")]
    Client {
        cluster: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cluster {cluster}: {source}")]
    Api {
        cluster: String,
        #[source]
        source: kube::Error,
    },
    #[error("{component} exited ({status}); the end of {log}:\n{tail}")]
    Exited {
        component: String,
        status: String,
        log: String,
        tail: String,
    },
    #[error("reading cluster set {0}: {1}")]
    Load(PathBuf, String),
    #[error(transparent)]
    Node(#[from] crate::cluster::node::info::Error),
    #[error("cluster {cluster}: {source}")]
    Pools {
        cluster: String,
        #[source]
        source: pools::Error,
    },
    #[error("a real node was asked for cluster {0}, which this set does not have")]
    UnknownCluster(String),
}

/// How to reach one running cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterInfo {
    /// `manager`, `worker-1`, `worker-2`, …
    pub name: String,
    /// `https://127.0.0.1:<port>`
    pub server: String,
    /// An admin kubeconfig (client certificate in `system:masters`).
    pub kubeconfig: PathBuf,
    /// Its real nodes (each a kubelet and a containerd), if it was started
    /// with any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub real_nodes: Vec<RealNodeInfo>,
}

impl ClusterInfo {
    /// Its first real node, if it has one.
    pub fn real_node(&self) -> Option<&RealNodeInfo> {
        self.real_nodes.first()
    }

    /// An admin client for this cluster.
    pub async fn client(&self) -> Result<kube::Client, Error> {
        self.client_with(|_| {}).await
    }

    /// A client that acts as `user` in `groups` (impersonated by the admin):
    /// the API server authorizes and admits its requests as theirs.
    pub async fn client_as(&self, user: &str, groups: &[&str]) -> Result<kube::Client, Error> {
        self.client_with(|config| {
            config.auth_info.impersonate = Some(user.to_string());
            config.auth_info.impersonate_groups =
                Some(groups.iter().map(|g| g.to_string()).collect());
        })
        .await
    }

    async fn client_with(
        &self,
        change: impl FnOnce(&mut kube::Config),
    ) -> Result<kube::Client, Error> {
        let client_err = |source: Box<dyn std::error::Error + Send + Sync>| Error::Client {
            cluster: self.name.clone(),
            source,
        };
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)
            .map_err(|e| client_err(e.into()))?;
        let options = kube::config::KubeConfigOptions::default();
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| client_err(e.into()))?;
        change(&mut config);
        kube::Client::try_from(config).map_err(|e| client_err(e.into()))
    }
}

/// A manager cluster and its workers, as written to `clusters.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterSet {
    pub state_dir: PathBuf,
    /// The manager first, then the workers in order.
    pub clusters: Vec<ClusterInfo>,
}

impl ClusterSet {
    const FILE: &'static str = "clusters.json";

    pub fn manager(&self) -> &ClusterInfo {
        &self.clusters[0]
    }

    pub fn workers(&self) -> &[ClusterInfo] {
        &self.clusters[1..]
    }

    /// Reads the set a running supervisor wrote into `state_dir`.
    pub fn load(state_dir: &Path) -> Result<Self, Error> {
        let path = state_dir.join(Self::FILE);
        let text =
            std::fs::read_to_string(&path).map_err(|e| Error::Load(path.clone(), e.to_string()))?;
        let set: ClusterSet =
            serde_json::from_str(&text).map_err(|e| Error::Load(path.clone(), e.to_string()))?;
        if set.clusters.first().map(|c| c.name.as_str()) != Some(MANAGER) {
            return Err(Error::Load(
                path,
                "the first cluster is not the manager".into(),
            ));
        }
        Ok(set)
    }

    pub(crate) fn save(&self) -> Result<PathBuf, Error> {
        let path = self.state_dir.join(Self::FILE);
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::Io(path.display().to_string(), e.into()))?;
        std::fs::write(&path, text).map_err(|e| Error::Io(path.display().to_string(), e))?;
        Ok(path)
    }

    /// Shell lines that point kubectl and the test bed at these clusters.
    pub fn export_lines(&self) -> String {
        let mut lines = vec![format!(
            "export JOBRELAY_CLUSTERS={}",
            self.state_dir.display()
        )];
        for cluster in &self.clusters {
            let var = cluster.name.to_uppercase().replace('-', "_");
            lines.push(format!(
                "export KUBECONFIG_{var}={}",
                cluster.kubeconfig.display()
            ));
        }
        lines.push(format!(
            "export KUBECONFIG={}",
            self.manager().kubeconfig.display()
        ));
        lines.join("\n")
    }
}

/// The names of a manager and `workers` worker clusters.
pub fn cluster_names(workers: usize) -> Vec<String> {
    std::iter::once(MANAGER.to_string())
        .chain((1..=workers).map(|i| format!("worker-{i}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(dir: &str, workers: usize) -> ClusterSet {
        let clusters = cluster_names(workers)
            .into_iter()
            .enumerate()
            .map(|(i, name)| ClusterInfo {
                server: format!("https://127.0.0.1:{}", 6443 + i),
                kubeconfig: PathBuf::from(dir).join(&name).join("kubeconfig"),
                name,
                real_nodes: Vec::new(),
            })
            .collect();
        ClusterSet {
            state_dir: dir.into(),
            clusters,
        }
    }

    #[test]
    fn names_the_manager_first_then_numbered_workers() {
        assert_eq!(cluster_names(2), ["manager", "worker-1", "worker-2"]);
        assert_eq!(cluster_names(0), ["manager"]);
    }

    #[test]
    fn export_lines_point_at_every_kubeconfig() {
        let lines = set("/state", 2).export_lines();
        assert!(
            lines.contains("export JOBRELAY_CLUSTERS=/state\n"),
            "{lines}"
        );
        assert!(
            lines.contains("export KUBECONFIG_WORKER_2=/state/worker-2/kubeconfig"),
            "{lines}"
        );
        assert!(
            lines.ends_with("export KUBECONFIG=/state/manager/kubeconfig"),
            "{lines}"
        );
    }

    #[test]
    fn a_saved_set_loads_back_and_a_broken_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("jobrelay-set-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let saved = set(dir.to_str().unwrap(), 1);
        saved.save().unwrap();
        let loaded = ClusterSet::load(&dir).unwrap();
        assert_eq!(loaded.workers().len(), 1);
        assert_eq!(loaded.manager().server, saved.manager().server);

        std::fs::write(dir.join(ClusterSet::FILE), "{\"state_dir\": 1}").unwrap();
        let err = ClusterSet::load(&dir).unwrap_err().to_string();
        assert!(err.contains("clusters.json"), "names the file: {err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
