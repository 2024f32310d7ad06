//! JobSet in a test: the real controller (JobSet's `main` of the pinned
//! release, built by
//! [`jobset_build::ensure_jobset_built`](crate::jobset_build::ensure_jobset_built))
//! run as a process against one test cluster. Its CRD is applied
//! server-side, and its webhook configurations are registered, each pointing
//! by URL at the process on loopback, with a serving certificate of a CA made
//! for it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

use crate::certs::RelayCa;
use crate::cluster::ClusterInfo;
use crate::jobset_build::{self, JobSetRelease};
use crate::ports::free_port;
use crate::registration::install_crd;
use crate::relay::{http_get, start_logged};
use crate::wait::{self, Seen};

/// Label (and annotation) JobSet puts on every Pod of a JobSet, naming it.
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
/// Label JobSet puts on every child Job and Pod, naming its replicated Job.
pub const REPLICATED_JOB_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// Field manager of what the test kit applies for JobSet.
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
    child: Mutex<Option<Child>>,
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
            .arg("--zap-log-level=info")
            .env("KUBECONFIG", &cluster.kubeconfig);
        let log = state_dir
            .join("logs")
            .join(format!("jobset-{}.log", cluster.name));
        std::fs::create_dir_all(log.parent().context("logs folder")?)?;
        let child = start_logged(command, &log, "")?;
        let controller = JobSetController {
            cluster: cluster.name.clone(),
            child: Mutex::new(Some(child)),
        };
        wait::try_until(
            format!(
                "JobSet ready on {} (http://127.0.0.1:{health_port}/readyz; log {})",
                cluster.name,
                log.display()
            ),
            START_TIMEOUT,
            || async {
                match http_get(&format!("127.0.0.1:{health_port}"), "/readyz").await {
                    Ok((200, _)) => Seen::Ready(()),
                    Ok((code, body)) => Seen::Waiting(format!("HTTP {code}: {body}")),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await?;
        let base = format!("https://127.0.0.1:{webhook_port}");
        let ca_bundle = serde_json::to_value(ByteString(ca.ca_pem.clone().into_bytes()))?;
        install_webhooks(&client, &release.webhooks(), &base, &ca_bundle).await?;
        Ok(controller)
    }

    /// Kills the JobSet process.
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
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
/// [`crate::kueue`] calls this on its cluster.
pub async fn install_crds(client: &kube::Client, release: &JobSetRelease) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let dir = release.crds();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| dir.display().to_string())?
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        let crd: Value =
            serde_yaml_ng::from_str(&text).with_context(|| file.display().to_string())?;
        let name = crd["metadata"]["name"]
            .as_str()
            .context("CRD without a name")?
            .to_string();
        install_crd(&crds, &name, &crd)
            .await
            .with_context(|| format!("installing CRD {name}"))?;
    }
    Ok(())
}

/// One webhook of the release, rewritten to reach the process at `base`.
///
/// The Pod webhooks (`/mutate--v1-pod`, `/validate--v1-pod`) are listed for
/// every Pod create with `failurePolicy: Fail`, and act only on Pods that
/// carry JobSet's name annotation. Scoped to Pods with the
/// [`JOBSET_NAME_LABEL`] label — as JobSet's own release kustomization
/// scopes them — the cluster's other Pods (those of plain Jobs and of
/// jobrelay's mirrors) never wait on this process, and are not refused if it
/// dies.
fn served_webhook(hook: &Value, base: &str, ca_bundle: &Value) -> Option<Value> {
    let path = hook["clientConfig"]["service"]["path"].as_str()?;
    let mut hook = hook.clone();
    hook["clientConfig"] = json!({"url": format!("{base}{path}"), "caBundle": ca_bundle});
    if path.ends_with("--v1-pod") {
        hook["objectSelector"] = json!({"matchExpressions": [
            {"key": JOBSET_NAME_LABEL, "operator": "Exists"},
        ]});
    }
    Some(hook)
}

/// Registers the release's webhook configurations under names prefixed
/// `jobset-`, each webhook by URL on loopback.
async fn install_webhooks(
    client: &kube::Client,
    file: &Path,
    base: &str,
    ca_bundle: &Value,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file)?;
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let mut config: Value = serde::Deserialize::deserialize(document)?;
        let kind = config["kind"].as_str().unwrap_or_default().to_string();
        let name = format!(
            "jobset-{}",
            config["metadata"]["name"].as_str().unwrap_or_default()
        );
        config["metadata"]["name"] = json!(name);
        let webhooks: Vec<Value> = config["webhooks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|hook| served_webhook(hook, base, ca_bundle))
            .collect();
        config["webhooks"] = Value::Array(webhooks);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match kind.as_str() {
            "MutatingWebhookConfiguration" => {
                let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
                api.patch(&name, &params, &Patch::Apply(&config)).await?;
            }
            "ValidatingWebhookConfiguration" => {
                let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
                api.patch(&name, &params, &Patch::Apply(&config)).await?;
            }
            other => anyhow::bail!("unexpected {other} in {}", file.display()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_webhooks_are_scoped_to_jobset_pods_and_others_are_not() {
        let base = "https://127.0.0.1:1";
        let bundle = json!("Q0E=");
        let pod = json!({"clientConfig": {"service": {"path": "/mutate--v1-pod"}}});
        let jobset = json!({"clientConfig": {"service": {
            "path": "/validate-jobset-x-k8s-io-v1alpha2-jobset",
        }}});
        let pod = served_webhook(&pod, base, &bundle).expect("pod webhook");
        assert_eq!(
            pod["objectSelector"]["matchExpressions"][0]["key"],
            JOBSET_NAME_LABEL
        );
        assert_eq!(
            pod["clientConfig"]["url"],
            "https://127.0.0.1:1/mutate--v1-pod"
        );
        let jobset = served_webhook(&jobset, base, &bundle).expect("jobset webhook");
        assert!(jobset.get("objectSelector").is_none());
        assert_eq!(jobset["clientConfig"]["caBundle"], bundle);
    }
}
