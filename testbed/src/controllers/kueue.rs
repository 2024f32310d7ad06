//! Kueue in a test: the real controller (`cmd/kueue` of the pinned release,
//! built by [`kueue_build::ensure_kueue_built`]) run as a process against
//! one test cluster, as Kueue's own integration tests run it. Its CRDs are
//! applied server-side with their conversion webhook, and its webhook
//! configurations are registered, each pointing by URL at the process on
//! loopback, with a serving certificate of a CA made for it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::certs::RelayCa;
use crate::cluster::ClusterInfo;
use crate::controllers::manifests::{self, WebhookServer};
use crate::controllers::process::ControllerProcess;
use crate::go::{jobset_build, kueue_build};
use crate::host::ports::free_port;

/// The namespace Kueue runs in (its Events, its configuration's `namespace`).
pub const NAMESPACE: &str = "kueue-system";
/// Where Kueue v0.19.2 reads its metrics serving certificate when it does
/// not manage certificates itself; the path is fixed in its `main`.
const METRICS_CERTS: &str = "/etc/kueue/metrics/certs";
/// Field manager of what the test bed applies for Kueue.
const FIELD_MANAGER: &str = "jobrelay-e2e-kueue";
/// How long Kueue gets to start and install.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// How a test wants Kueue configured.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `waitForPodsReady.timeout`, e.g. `"5s"`; off when `None`.
    pub wait_for_pods_ready: Option<String>,
    /// `objectRetentionPolicies.workloads.afterFinished`; kept for good when
    /// `None`.
    pub workloads_after_finished: Option<String>,
}

/// Kueue integrations a test turns on beside `batch/job`, passed to
/// [`Kueue::start_with`].
#[derive(Debug, Clone, Default)]
pub struct Integrations {
    /// `jobset.x-k8s.io/jobset`: JobSet's CRD (of the release
    /// [`jobset_build`] pins) is installed on the
    /// cluster before Kueue starts, and Kueue's JobSet webhooks are
    /// registered. No JobSet controller is started; see
    /// [`crate::controllers::jobset::JobSetController`].
    pub jobset: bool,
}

/// A running Kueue; it dies with the test process.
pub struct Kueue {
    pub cluster: String,
    process: ControllerProcess,
}

impl Kueue {
    /// Installs and starts Kueue on `cluster` and waits until it is ready
    /// and its webhooks answer.
    pub async fn start(
        cluster: &ClusterInfo,
        state_dir: &Path,
        settings: &Settings,
    ) -> anyhow::Result<Kueue> {
        Self::start_with(cluster, state_dir, settings, &Integrations::default()).await
    }

    /// Like [`Kueue::start`], with the `integrations` turned on.
    pub async fn start_with(
        cluster: &ClusterInfo,
        state_dir: &Path,
        settings: &Settings,
        integrations: &Integrations,
    ) -> anyhow::Result<Kueue> {
        let release = kueue_build::ensure_kueue_built(&mut |line| eprintln!("{line}"))?;
        let dir = state_dir.join(format!("kueue-{}", cluster.name));
        std::fs::create_dir_all(&dir)?;
        let ca = RelayCa::new("Kueue webhook CA")?;
        let serving = ca.server()?;
        serving.write(&dir, "tls")?;
        metrics_certificate(&serving)?;

        let client = cluster.client().await?;
        let webhook_port = free_port()?;
        let health_port = free_port()?;
        let server = WebhookServer::on_loopback(webhook_port, &ca)?;
        manifests::install_crds(&client, &release.crds(), |crd| {
            with_conversion(crd, &server)
        })
        .await?;
        if integrations.jobset {
            let jobset = jobset_build::ensure_jobset_built(&mut |line| eprintln!("{line}"))?;
            crate::controllers::jobset::install_crds(&client, &jobset).await?;
        }
        ensure_namespace(&client, NAMESPACE).await?;

        let config = dir.join("config.yaml");
        std::fs::write(
            &config,
            configuration(&dir, webhook_port, health_port, settings, integrations),
        )?;
        let mut command = Command::new(release.binary());
        command
            .arg(format!("--config={}", config.display()))
            .arg("--feature-gates=VisibilityOnDemand=false")
            .arg("--zap-log-level=info");
        let process = ControllerProcess::start(
            ("Kueue", "kueue"),
            cluster,
            state_dir,
            command,
            (health_port, "/readyz"),
            START_TIMEOUT,
        )
        .await?;
        let kueue = Kueue {
            cluster: cluster.name.clone(),
            process,
        };
        manifests::register_webhooks(
            &client,
            &release.webhooks(),
            "kueue-",
            FIELD_MANAGER,
            &server,
            |path, hook| served(path, integrations).then_some(hook),
        )
        .await?;
        Ok(kueue)
    }

    /// Kills the Kueue process.
    pub fn kill(&self) {
        self.process.kill();
    }
}

/// Kueue's configuration file for a process on loopback: the controllers'
/// concurrency and the client's rate as Kueue's release ships them
/// (`config/components/manager/controller_manager_config.yaml`), what a
/// platform team installing Kueue runs.
fn configuration(
    dir: &Path,
    webhook_port: u16,
    health_port: u16,
    settings: &Settings,
    integrations: &Integrations,
) -> String {
    let mut frameworks = vec!["\"batch/job\""];
    if integrations.jobset {
        frameworks.push("\"jobset.x-k8s.io/jobset\"");
    }
    let mut config = format!(
        "apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: {NAMESPACE}
health:
  healthProbeBindAddress: 127.0.0.1:{health_port}
metrics:
  bindAddress: \"0\"
webhook:
  host: 127.0.0.1
  port: {webhook_port}
  certDir: {}
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 10
    LocalQueue.kueue.x-k8s.io: 5
    Cohort.kueue.x-k8s.io: 1
    ClusterQueue.kueue.x-k8s.io: 5
    ResourceFlavor.kueue.x-k8s.io: 1
clientConnection:
  qps: 300
  burst: 500
integrations:
  frameworks: [{}]
",
        dir.display(),
        frameworks.join(", ")
    );
    if let Some(timeout) = &settings.wait_for_pods_ready {
        config.push_str(&format!(
            "waitForPodsReady:
  timeout: {timeout}
  blockAdmission: false
  requeuingStrategy:
    timestamp: Eviction
    backoffBaseSeconds: 1
    backoffMaxSeconds: 5
"
        ));
    }
    if let Some(after) = &settings.workloads_after_finished {
        config.push_str(&format!(
            "objectRetentionPolicies:
  workloads:
    afterFinished: {after}
"
        ));
    }
    config
}

/// Kueue v0.19.2 exits without a metrics certificate at its fixed path, even
/// with metrics off; one is written there when the path is free.
fn metrics_certificate(serving: &crate::certs::Issued) -> anyhow::Result<()> {
    let dir = PathBuf::from(METRICS_CERTS);
    if dir.join("tls.crt").is_file() && dir.join("tls.key").is_file() {
        return Ok(());
    }
    serving.write(&dir, "tls").with_context(|| {
        format!("Kueue v0.19.2 needs a certificate in {METRICS_CERTS} (fixed in its main); writing one there failed")
    })?;
    Ok(())
}

async fn ensure_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The CRDs whose versions Kueue converts (its webhook at `/convert`), as
/// the release's `config/components/crd/kustomization.yaml` patches them;
/// the others serve v1beta1 and v1beta2 with the same schema.
const CONVERTED: [&str; 5] = [
    "localqueues",
    "clusterqueues",
    "cohorts",
    "workloads",
    "multikueueclusters",
];

/// Gives a CRD Kueue converts its conversion webhook (`/convert` on
/// `server`).
fn with_conversion(crd: &mut Value, server: &WebhookServer) {
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
    if CONVERTED.contains(&plural) {
        crd["spec"]["conversion"] = json!({
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": server.client_config("/convert"),
                "conversionReviewVersions": ["v1"],
            },
        });
    }
}

/// The paths the process serves: Kueue's own kinds, batch/v1 Jobs, and
/// JobSets when that integration is on.
fn served(path: &str, integrations: &Integrations) -> bool {
    path.contains("-kueue-x-k8s-io-")
        || path.ends_with("-batch-v1-job")
        || (integrations.jobset && path.ends_with("-jobset-x-k8s-io-v1alpha2-jobset"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::manifests::tests::server;

    #[test]
    fn only_the_crds_kueue_converts_get_its_conversion_webhook() {
        let mut workloads = json!({"spec": {"names": {"plural": "workloads"}}});
        let mut flavors = json!({"spec": {"names": {"plural": "resourceflavors"}}});
        with_conversion(&mut workloads, &server());
        with_conversion(&mut flavors, &server());
        assert_eq!(
            workloads["spec"]["conversion"]["webhook"]["clientConfig"]["url"],
            "https://127.0.0.1:1/convert"
        );
        assert!(flavors["spec"].get("conversion").is_none());
    }

    #[test]
    fn jobset_webhooks_are_served_only_with_that_integration() {
        let jobset = "/mutate-jobset-x-k8s-io-v1alpha2-jobset";
        let on = Integrations { jobset: true };
        assert!(served(jobset, &on));
        assert!(!served(jobset, &Integrations::default()));
        assert!(served("/mutate-batch-v1-job", &Integrations::default()));
        assert!(!served("/mutate--v1-pod", &on));
    }
}
