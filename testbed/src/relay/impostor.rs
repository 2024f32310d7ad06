//! A second manager installation of the relay's origin: the same binary, CA
//! and origin, run against another cluster — what a restored backup or a
//! staging copy given the production origin would be. Agents must refuse
//! it while they hold the first one's mirrors.

use std::process::Child;
use std::sync::Mutex;

use crate::cluster::ClusterInfo;
use crate::relay::registration::register_on;

use super::start::{Launch, Replica};
use super::{Relay, lock};

/// The second installation's only replica; killed when dropped.
pub struct Impostor {
    replica: Replica,
    child: Mutex<Option<Child>>,
}

impl Impostor {
    /// `https://127.0.0.1:<port>` of its Relay service.
    pub fn url(&self) -> &str {
        &self.replica.url
    }

    /// One scrape of its `/metrics`.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        Ok(super::http_get(&self.replica.metrics_addr, "/metrics")
            .await?
            .1)
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.replica.log).unwrap_or_default()
    }
}

impl Drop for Impostor {
    fn drop(&mut self) {
        if let Some(mut child) = lock(&self.child).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Relay {
    /// Starts a manager of this relay's origin and CA against `cluster`
    /// (its CRDs installed and `workers` registered there first).
    pub async fn start_impostor(
        &self,
        cluster: &ClusterInfo,
        workers: &[&str],
    ) -> anyhow::Result<Impostor> {
        register_on(cluster.client().await?, workers.iter().copied()).await?;
        let (cert, key) = self.ca.server()?.write(&self.tls_dir, "impostor")?;
        let mut launch = Launch::new(
            self.replicas[0].launch.bin().to_path_buf(),
            &cluster.kubeconfig,
        );
        launch.path("--tls-cert", &cert);
        launch.path("--tls-key", &key);
        launch.path("--client-ca", &self.ca_path);
        let log = self
            .logs
            .join(format!("jobrelay-manager-on-{}.log", cluster.name));
        let replica = Replica::new(self.replicas.len(), launch, &[], log)?;
        let child = super::start_logged(replica.launch.command(), &replica.log, &self.log_filter)?;
        Ok(Impostor {
            replica,
            child: Mutex::new(Some(child)),
        })
    }
}
