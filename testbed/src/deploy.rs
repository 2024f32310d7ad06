//! jobrelay installed as users install it: the images of `cargo xtask
//! image` loaded onto each cluster's real node, the chart installed with
//! helm — the manager's release in the manager cluster, an agent's in each
//! worker — and the Deployments, ReplicaSets and kubelets running the Pods
//! with their own ServiceAccount tokens, ConfigMaps and Secrets. Every
//! permission a binary uses is the chart's.
//!
//! The real nodes share the host's network, so the Pods run with
//! `hostNetwork`, listen on their node's address only (`listenOnPodIP`) on
//! ports of their own and reach their API server at its loopback address
//! (`k8sServiceHost`), as the chart offers for clusters without
//! kube-proxy. The manager cluster has three real nodes for the two
//! replicas (one more for a rollout's surge or a drained node's
//! replacement); nothing routes the agents' Service without kube-proxy, so
//! the agents list every manager node's address and find the leader there.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};

use crate::certs::{Issued, RelayCa};
use crate::cluster::ClusterInfo;
use crate::cluster::node::{REAL_NODE_LABEL, REAL_NODE_TAINT};
use crate::host::ports::free_port;
use crate::kit::{self, Clusters};
pub use helm::{helm_in, kubectl_in};
use images::Image;
use release::Release;

pub mod guide;
pub mod helm;
pub mod images;
pub mod platforms;
pub mod registry;
pub mod release;
pub mod shell;

/// The namespace both releases install into.
pub const NAMESPACE: &str = "jobrelay-system";
/// Both releases' name.
pub const RELEASE: &str = "jobrelay";
/// The origin of the installed relay.
pub const ORIGIN: &str = "deploy-e2e";
/// The namespaces the scenarios use, one each, made on every cluster before
/// the agents are installed: worker-2's agent is open to these alone (its
/// namespace policy names them, so it holds Roles in them and no
/// ClusterRole).
pub const NAMESPACES: [&str; 10] = [
    "deploy-basic",
    "deploy-real",
    "deploy-kueue",
    "deploy-suspend",
    "deploy-lost",
    "deploy-ha",
    "deploy-policy",
    "deploy-why",
    "deploy-visibility",
    "deploy-upgrade",
];
/// A namespace on every cluster that worker-2's policy does not name.
pub const OUTSIDE: &str = "deploy-outside";

/// The worker whose agent's namespace policy names the scenario namespaces
/// ([`NAMESPACES`]); the others' opens every namespace.
pub const SCOPED_WORKER: &str = "worker-2";

/// A relay installed by the chart on clusters with real nodes.
pub struct Installed {
    pub clusters: &'static Clusters,
    /// The release installed first.
    pub release: Release,
    /// The manager's Relay port on its nodes (its Pods run on the host's
    /// network).
    pub relay_port: u16,
    /// The values the manager's release was installed with, but its image,
    /// for upgrades ([`Installed::manager_args`]).
    pub manager_values: Vec<String>,
    /// Each worker's agent's values, but its image.
    agent_values: BTreeMap<String, Vec<String>>,
}

/// The port of a cluster's API server on 127.0.0.1.
pub fn api_port(cluster: &ClusterInfo) -> anyhow::Result<String> {
    cluster
        .server
        .rsplit_once(':')
        .map(|(_, port)| port.to_string())
        .with_context(|| format!("no port in {}", cluster.server))
}

/// The values that choose a release's image (loaded on the nodes, never
/// pulled).
fn image_values(part: &str, image: &Image) -> Vec<String> {
    vec![
        "--set".into(),
        format!("{part}.image.repository={}", image.repository()),
        "--set".into(),
        format!("{part}.image.tag={}", image.tag()),
        "--set".into(),
        format!("{part}.image.pullPolicy=Never"),
    ]
}

/// Values every release takes: run on the real node only, on the host's
/// network, reaching its API server at 127.0.0.1.
fn common_values(part: &str, cluster: &ClusterInfo) -> anyhow::Result<Vec<String>> {
    let (selector, tolerations) = on_real_node();
    Ok(vec![
        "--set".into(),
        format!("origin={ORIGIN}"),
        "--set".into(),
        format!("{part}.enabled=true"),
        "--set".into(),
        format!("{part}.hostNetwork=true"),
        "--set".into(),
        format!("{part}.listenOnPodIP=true"),
        "--set-json".into(),
        format!("{part}.nodeSelector={selector}"),
        "--set-json".into(),
        format!("{part}.tolerations={tolerations}"),
        "--set".into(),
        "k8sServiceHost=127.0.0.1".into(),
        "--set-string".into(),
        format!("k8sServicePort={}", api_port(cluster)?),
        "--set".into(),
        format!("{part}.logLevel=info\\,jobrelay_manager=debug\\,jobrelay_agent=debug"),
    ])
}

/// A Pod's `nodeSelector` and `tolerations` that put it on a cluster's real
/// node (and only there).
pub fn on_real_node() -> (serde_json::Value, serde_json::Value) {
    (
        serde_json::json!({ REAL_NODE_LABEL: "true" }),
        serde_json::json!([
            {"key": REAL_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"}
        ]),
    )
}

/// A `kubernetes.io/tls` Secret as the chart reads it.
async fn tls_secret(
    cluster: &ClusterInfo,
    name: &str,
    issued: &Issued,
    ca: &str,
) -> anyhow::Result<()> {
    let secrets: Api<Secret> = Api::namespaced(cluster.client().await?, NAMESPACE);
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": issued.cert, "tls.key": issued.key, "ca.crt": ca},
    }))?;
    secrets.create(&PostParams::default(), &secret).await?;
    Ok(())
}

/// `helm install` (or `upgrade`) of `chart` with `values`, waiting until
/// its Deployments are available.
pub fn release_args(verb: &str, chart: &Path, values: &[String]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        verb.into(),
        RELEASE.into(),
        chart.display().to_string(),
        "--namespace".into(),
        NAMESPACE.into(),
        "--wait".into(),
        "--timeout".into(),
        "3m".into(),
    ];
    args.extend(values.iter().cloned());
    args
}

impl Installed {
    /// Loads the images, writes the certificates, installs the manager's
    /// release (with its CRDs), registers the workers, and installs an
    /// agent's release in each; returns once every `helm --wait` did.
    pub async fn install(clusters: &'static Clusters, release: Release) -> anyhow::Result<Self> {
        // Two CAs, as the chart requires: the manager's, and the agents' own,
        // which the manager trusts for agents and nothing else.
        let ca = RelayCa::new("jobrelay-deploy-ca")?;
        let agents_ca = RelayCa::new("jobrelay-deploy-agents-ca")?;
        let manager = clusters.manager();
        load(clusters, &release)?;
        kit::create_namespace(&manager.client().await?, NAMESPACE).await;
        let addresses: Vec<String> = manager.real_nodes.iter().map(|n| n.address()).collect();
        tls_secret(
            manager,
            "manager-tls",
            &ca.server_for(&addresses)?,
            &ca.ca_pem,
        )
        .await?;
        let config_maps: Api<ConfigMap> = Api::namespaced(manager.client().await?, NAMESPACE);
        let bundle: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "agents-ca"},
            "data": {"ca.crt": agents_ca.ca_pem},
        }))?;
        config_maps.create(&PostParams::default(), &bundle).await?;
        let relay_port = free_port()?;
        let manager_urls: Vec<String> = addresses
            .iter()
            .map(|address| format!("https://{address}:{relay_port}"))
            .collect();
        let mut manager_values = common_values("manager", manager)?;
        manager_values.extend([
            "--set".into(),
            "manager.tls.secretName=manager-tls".into(),
            "--set".into(),
            "manager.clientCA.configMapName=agents-ca".into(),
            "--set".into(),
            format!("manager.ports.relay={relay_port}"),
            "--set".into(),
            format!("manager.ports.health={}", free_port()?),
            "--set".into(),
            format!("manager.ports.metrics={}", free_port()?),
            "--set".into(),
            format!("manager.webhook.port={}", free_port()?),
            "--set".into(),
            format!("manager.visibility.port={}", free_port()?),
        ]);
        let mut installed = Installed {
            clusters,
            release,
            relay_port,
            manager_values,
            agent_values: BTreeMap::new(),
        };
        helm_in(
            manager,
            &installed.manager_args("install", &installed.release, &[]),
        )
        .await?;
        register(manager, clusters.workers()).await?;
        for cluster in std::iter::once(manager).chain(clusters.workers()) {
            let client = cluster.client().await?;
            for namespace in NAMESPACES.iter().chain([&OUTSIDE]) {
                kit::create_namespace(&client, namespace).await;
            }
        }
        for worker in clusters.workers() {
            kit::create_namespace(&worker.client().await?, NAMESPACE).await;
            let issued = agents_ca.client(&worker.name)?;
            tls_secret(worker, "agent-tls", &issued, &ca.ca_pem).await?;
            let mut values = common_values("agent", worker)?;
            values.extend([
                "--set".into(),
                "agent.tls.secretName=agent-tls".into(),
                "--set".into(),
                format!("agent.cluster={}", worker.name),
                "--set".into(),
                // helm's `--set` splits on unescaped commas.
                format!("agent.managerUrl={}", manager_urls.join("\\,")),
                "--set".into(),
                format!("agent.ports.health={}", free_port()?),
                "--set".into(),
                format!("agent.ports.metrics={}", free_port()?),
                "--set".into(),
                "agent.orphanPodGrace=2s".into(),
            ]);
            // The chart opens no namespace unless told: worker-2's agent
            // names the scenario namespaces, worker-1's opens every one.
            let policy = match worker.name == SCOPED_WORKER {
                true => serde_json::json!({"namespaces": {"names": NAMESPACES}}),
                false => serde_json::json!({"namespaces": {"all": true}}),
            };
            values.extend(["--set-json".into(), format!("agent.config={policy}")]);
            installed.agent_values.insert(worker.name.clone(), values);
            let args = installed.agent_args(&worker.name, "install", &installed.release, &[]);
            helm_in(worker, &args).await?;
        }
        Ok(installed)
    }

    /// `helm <verb>` of the manager's release of `release`, with the values
    /// it was installed with and `more`.
    pub fn manager_args(&self, verb: &str, release: &Release, more: &[String]) -> Vec<String> {
        let mut values = self.manager_values.clone();
        values.extend(image_values("manager", &release.images.manager));
        values.extend(more.iter().cloned());
        release_args(verb, &release.chart, &values)
    }

    /// `helm <verb>` of `worker`'s agent's release of `release`, with the
    /// values it was installed with and `more`.
    pub fn agent_args(
        &self,
        worker: &str,
        verb: &str,
        release: &Release,
        more: &[String],
    ) -> Vec<String> {
        let mut values = self.agent_values.get(worker).cloned().unwrap_or_default();
        values.extend(image_values("agent", &release.images.agent));
        values.extend(more.iter().cloned());
        release_args(verb, &release.chart, &values)
    }

    /// The lines of every jobrelay container's log on the clusters' real
    /// nodes that tell of a refusal by the API server's authorization (HTTP
    /// 403, reason Forbidden; not a 422 whose field is "Forbidden").
    pub fn forbidden_lines(&self) -> Vec<String> {
        let mut found = Vec::new();
        for cluster in std::iter::once(self.clusters.manager()).chain(self.clusters.workers()) {
            for (file, text) in cluster
                .real_nodes
                .iter()
                .flat_map(|node| pod_logs(&node.pod_logs, NAMESPACE))
            {
                for line in text.lines() {
                    if line.contains("code: 403") || line.contains("reason: \"Forbidden\"") {
                        found.push(format!("{}: {file}: {line}", cluster.name));
                    }
                }
            }
        }
        found
    }
}

/// Imports `release`'s images into the real nodes: the manager's on the
/// manager cluster's, the agent's on every worker's.
pub fn load(clusters: &Clusters, release: &Release) -> anyhow::Result<()> {
    load_image(clusters.manager(), &release.images.manager)?;
    for worker in clusters.workers() {
        load_image(worker, &release.images.agent)?;
    }
    Ok(())
}

/// Imports `image` into the cluster's real nodes.
fn load_image(cluster: &ClusterInfo, image: &Image) -> anyhow::Result<()> {
    anyhow::ensure!(
        !cluster.real_nodes.is_empty(),
        "{} has no real node",
        cluster.name
    );
    for node in &cluster.real_nodes {
        node.import_image(&image.tar).with_context(|| {
            format!(
                "importing {} into {}'s {}",
                image.reference,
                cluster.name,
                node.name()
            )
        })?;
    }
    Ok(())
}

/// Registers every worker as a WorkerCluster, with the CRD the chart
/// installed.
async fn register(manager: &ClusterInfo, workers: &[ClusterInfo]) -> anyhow::Result<()> {
    let clusters: Api<WorkerCluster> = Api::all(manager.client().await?);
    for worker in workers {
        let cluster: WorkerCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "jobrelay.dev/v1alpha1",
            "kind": "WorkerCluster",
            "metadata": {"name": worker.name},
            "spec": {"lostAfter": "5m"},
        }))?;
        clusters.create(&PostParams::default(), &cluster).await?;
    }
    Ok(())
}

/// The container logs the kubelet wrote for Pods of `namespace`, by file.
pub fn pod_logs(root: &std::path::Path, namespace: &str) -> BTreeMap<String, String> {
    let mut logs = BTreeMap::new();
    let prefix = format!("{namespace}_");
    let Ok(pods) = std::fs::read_dir(root) else {
        return logs;
    };
    for pod in pods.flatten() {
        if !pod.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        for container in std::fs::read_dir(pod.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            for file in std::fs::read_dir(container.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if let Ok(text) = std::fs::read_to_string(file.path()) {
                    logs.insert(file.path().display().to_string(), text);
                }
            }
        }
    }
    logs
}
