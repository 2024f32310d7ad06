//! cert-manager on a test cluster, as a platform team has it before
//! installing jobrelay: its CRDs, and its controller (the pinned release,
//! built by [`certmanager_build::ensure_cert_manager_built`]) run as a
//! process against the cluster. Enough for the CA and self-signed Issuers
//! of the install guide; no webhook (nothing validates the objects but the
//! API server's schema) and no CA injector.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::cluster::ClusterInfo;
use crate::controllers::manifests;
use crate::controllers::process::ControllerProcess;
use crate::go::certmanager_build;
use crate::host::ports::free_port;

/// Building the release on a cold cache is not part of this.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// cert-manager's controller running against one cluster.
pub struct CertManager {
    process: ControllerProcess,
}

impl CertManager {
    /// Installs cert-manager's CRDs on `cluster` and starts its controller,
    /// ready once it serves its metrics.
    pub async fn start(cluster: &ClusterInfo, state_dir: &Path) -> anyhow::Result<CertManager> {
        let release =
            certmanager_build::ensure_cert_manager_built(&mut |line| eprintln!("{line}"))?;
        let client = cluster.client().await?;
        // The release's CRD files carry chart labels still to be templated.
        manifests::install_crds(&client, &release.crds(), |crd| {
            if let Some(metadata) = crd["metadata"].as_object_mut() {
                metadata.remove("labels");
            }
        })
        .await?;
        let metrics_port = free_port()?;
        let mut command = Command::new(release.binary());
        command
            .arg(format!("--kubeconfig={}", cluster.kubeconfig.display()))
            .arg("--leader-elect=false")
            .arg(format!("--metrics-listen-address=127.0.0.1:{metrics_port}"))
            .arg("--v=2");
        let process = ControllerProcess::start(
            ("cert-manager", "cert-manager"),
            cluster,
            state_dir,
            command,
            (metrics_port, "/metrics"),
            START_TIMEOUT,
        )
        .await?;
        Ok(CertManager { process })
    }

    /// Kills the controller.
    pub fn kill(&self) {
        self.process.kill();
    }
}
