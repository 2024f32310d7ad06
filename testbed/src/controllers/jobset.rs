//! JobSet in a test: the real controller (JobSet's `main` of the pinned
//! release, built by [`jobset_build::ensure_jobset_built`]) run as a process
//! against one test cluster. Its CRD is applied server-side, and its webhook
//! configurations are registered, each pointing by URL at the process on
//! loopback, with a serving certificate of a CA made for it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kube::api::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::certs::RelayCa;
use crate::cluster::{ClusterInfo, ClusterSet};
use crate::controllers::manifests::{self, WebhookServer};
use crate::controllers::process::ControllerProcess;
use crate::go::jobset_build::{self, JobSetRelease};
use crate::host::ports::free_port;

/// Label (and annotation) JobSet puts on every Pod of a JobSet, naming it.
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
/// Label JobSet puts on every child Job and Pod, naming its replicated Job.
pub const REPLICATED_JOB_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// Field manager of what the test bed applies for JobSet.
const FIELD_MANAGER: &str = "jobrelay-e2e-jobset";
/// How long JobSet gets to start and install.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// The JobSet kind (`jobset.x-k8s.io/v1alpha2`), for a
/// [`DynamicObject`](kube::api::DynamicObject) API.
pub fn jobset_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha2", "JobSet");
    ApiResource::from_gvk_with_plural(&gvk, "jobsets")
}

/// A running JobSet controller; it dies with the test process.
pub struct JobSetController {
    pub cluster: String,
    process: ControllerProcess,
}

impl JobSetController {
    /// Installs and starts JobSet on `cluster` and waits until it is ready
    /// and its webhooks are registered.
    pub async fn start(
        cluster: &ClusterInfo,
        state_dir: &Path,
    ) -> anyhow::Result<JobSetController> {
        let release = jobset_build::ensure_jobset_built(&mut |line| eprintln!("{line}"))?;
        let dir = state_dir.join(format!("jobset-{}", cluster.name));
        std::fs::create_dir_all(&dir)?;
        let ca = RelayCa::new("JobSet webhook CA")?;
        // The webhook server reads `tls.crt`/`tls.key` from `webhook.certDir`;
        // the (disabled) metrics server would read the same names from
        // `metrics.certDir`, which otherwise defaults to a fixed folder in /tmp.
        ca.server()?.write(&dir, "tls")?;

        let client = cluster.client().await?;
        install_crds(&client, &release).await?;
        let webhook_port = free_port()?;
        let health_port = free_port()?;
        let config = dir.join("config.yaml");
        std::fs::write(&config, configuration(&dir, webhook_port, health_port))?;
        let mut command = Command::new(release.binary());
        command
            .arg(format!("--config={}", config.display()))
            .arg("--zap-log-level=info");
        let process = ControllerProcess::start(
            ("JobSet", "jobset"),
            cluster,
            state_dir,
            command,
            (health_port, "/readyz"),
            START_TIMEOUT,
        )
        .await?;
        let controller = JobSetController {
            cluster: cluster.name.clone(),
            process,
        };
        let server = WebhookServer::on_loopback(webhook_port, &ca)?;
        manifests::register_webhooks(
            &client,
            &release.webhooks(),
            "jobset-",
            FIELD_MANAGER,
            &server,
            scope_pod_webhooks,
        )
        .await?;
        Ok(controller)
    }

    /// Starts the controller on the worker of `set` named `worker`.
    pub async fn start_on(set: &ClusterSet, worker: &str) -> anyhow::Result<JobSetController> {
        let cluster = set
            .workers()
            .iter()
            .find(|w| w.name == worker)
            .ok_or_else(|| anyhow::anyhow!("the cluster set has no worker {worker}"))?;
        JobSetController::start(cluster, &set.state_dir).await
    }

    /// Kills the JobSet process.
    pub fn kill(&self) {
        self.process.kill();
    }
}

/// JobSet's configuration file (`config.jobset.x-k8s.io/v1alpha1`) for a
/// process on loopback: certificates from `dir`, no leader election, metrics
/// off.
fn configuration(dir: &Path, webhook_port: u16, health_port: u16) -> String {
    format!(
        "apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
health:
  healthProbeBindAddress: 127.0.0.1:{health_port}
metrics:
  bindAddress: \"0\"
  certDir: {dir}
webhook:
  host: 127.0.0.1
  port: {webhook_port}
  certDir: {dir}
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
clientConnection:
  qps: 200
  burst: 400
",
        dir = dir.display()
    )
}

/// Applies the release's CRDs server-side. JobSet serves one version
/// (`v1alpha2`), so the conversion webhook its kustomization patches in is
/// left out. Kueue's jobset integration needs them too, so
/// [`crate::controllers::kueue`] calls this on its cluster.
pub async fn install_crds(client: &kube::Client, release: &JobSetRelease) -> anyhow::Result<()> {
    manifests::install_crds(client, &release.crds(), |_| {}).await
}

/// One webhook of the release, already reaching the process by URL, as it
/// is registered.
///
/// The Pod webhooks (`/mutate--v1-pod`, `/validate--v1-pod`) are listed for
/// every Pod create with `failurePolicy: Fail`, and act only on Pods that
/// carry JobSet's name annotation. Scoped to Pods with the
/// [`JOBSET_NAME_LABEL`] label — as JobSet's own release kustomization
/// scopes them — the cluster's other Pods (those of plain Jobs and of
/// jobrelay's mirrors) never wait on this process, and are not refused if it
/// dies.
fn scope_pod_webhooks(path: &str, mut hook: Value) -> Option<Value> {
    if path.ends_with("--v1-pod") {
        hook["objectSelector"] = json!({"matchExpressions": [
            {"key": JOBSET_NAME_LABEL, "operator": "Exists"},
        ]});
    }
    Some(hook)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::manifests::{registration, tests::server};

    #[test]
    fn pod_webhooks_are_scoped_to_jobset_pods_and_others_are_not() {
        let config = json!({
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [
                {"clientConfig": {"service": {"path": "/mutate--v1-pod"}}},
                {"clientConfig": {"service": {
                    "path": "/validate-jobset-x-k8s-io-v1alpha2-jobset",
                }}},
            ],
        });
        let (_, name, config) = registration(config, "jobset-", &server(), scope_pod_webhooks);
        assert_eq!(name, "jobset-mutating-webhook-configuration");
        let [pod, jobset] = config["webhooks"].as_array().expect("webhooks").as_slice() else {
            panic!("two webhooks in {config}");
        };
        assert_eq!(
            pod["objectSelector"]["matchExpressions"][0]["key"],
            JOBSET_NAME_LABEL
        );
        assert_eq!(
            pod["clientConfig"]["url"],
            "https://127.0.0.1:1/mutate--v1-pod"
        );
        assert!(jobset.get("objectSelector").is_none());
        assert_eq!(jobset["clientConfig"]["caBundle"], "Q0E=");
    }
}
