//! What the MultiKueue comparison's queues rest on: MultiKueue's
//! AdmissionCheck, `MultiKueueConfig` and a `MultiKueueCluster` per worker
//! (its kubeconfig, certificates inline, in a Secret), jobrelay's
//! AdmissionCheck, the workers' flavor; and the switch that opts the workers
//! in to worker-side Kueue.

use std::path::Path;

use jobrelay_testbed::cluster::supervisor::Supervisor;
use jobrelay_testbed::cluster::{ClusterInfo, ClusterSet};
use jobrelay_testbed::controllers::kueue::{Kueue, Settings};
use jobrelay_testbed::objects::kueue_objects;
use jobrelay_testbed::relay::Relay;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::systems::{KUEUE_NAMESPACE, MULTIKUEUE};
use crate::bench::{release_options, start_clusters};
use crate::log;

/// A manager and two workers with Kueue on each (as released), jobrelay
/// (release build), and what every system's queues rest on ([`prepare`]).
pub(crate) struct WithKueue {
    pub(crate) set: ClusterSet,
    supervisor: Supervisor,
    kueues: Vec<Kueue>,
    relay: Relay,
}

impl WithKueue {
    /// Starts it all, in a state folder named for `what`.
    pub(crate) async fn start(what: &str) -> anyhow::Result<WithKueue> {
        let (supervisor, set) = start_clusters(what)?;
        let mut kueues = Vec::new();
        for cluster in &set.clusters {
            log(&format!("starting Kueue on {}", cluster.name));
            kueues.push(Kueue::start(cluster, &set.state_dir, &Settings::default()).await?);
        }
        let relay = Relay::start_with(&set, release_options()).await?;
        prepare(&set).await?;
        Ok(WithKueue {
            set,
            supervisor,
            kueues,
            relay,
        })
    }

    pub(crate) fn stop(self) -> anyhow::Result<()> {
        drop(self.relay);
        self.kueues.iter().for_each(Kueue::kill);
        self.supervisor.stop()
    }
}

/// The objects every system's queues rest on: on the manager, jobrelay's and
/// MultiKueue's AdmissionChecks, the MultiKueueConfig and a MultiKueueCluster
/// (kubeconfig in a Secret) per worker; on each worker, the flavor.
async fn prepare(set: &ClusterSet) -> anyhow::Result<()> {
    let manager = set.manager().client().await?;
    kueue_objects::admission_check(&manager, "jobrelay", None).await?;
    let workers: Vec<String> = set.workers().iter().map(|w| w.name.clone()).collect();
    let secrets: Api<Secret> = Api::namespaced(manager.clone(), KUEUE_NAMESPACE);
    for worker in set.workers() {
        let secret = format!("{}-kubeconfig", worker.name);
        let body = json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "namespace": KUEUE_NAMESPACE},
            "stringData": {"kubeconfig": inline_kubeconfig(worker)?},
        });
        secrets
            .patch(
                &secret,
                &PatchParams::apply("jobrelay-bench").force(),
                &Patch::Apply(&body),
            )
            .await?;
        kueue_objects::apply(
            &manager,
            "MultiKueueCluster",
            None,
            json!({
                "metadata": {"name": worker.name},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}},
            }),
        )
        .await?;
        kueue_objects::flavor(&worker.client().await?).await?;
    }
    kueue_objects::apply(
        &manager,
        "MultiKueueConfig",
        None,
        json!({"metadata": {"name": "bench"}, "spec": {"clusters": workers}}),
    )
    .await?;
    kueue_objects::apply(
        &manager,
        "AdmissionCheck",
        None,
        json!({
            "metadata": {"name": "multikueue"},
            "spec": {
                "controllerName": MULTIKUEUE,
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "bench"},
            },
        }),
    )
    .await?;
    Ok(())
}

/// Opts every worker in to worker-side Kueue (`spec.kueue: {}` on its
/// WorkerCluster), or out of it.
pub(super) async fn worker_side_kueue(set: &ClusterSet, on: bool) -> anyhow::Result<()> {
    let clusters: Api<jobrelay_manager::clusters::worker_cluster::WorkerCluster> =
        Api::all(set.manager().client().await?);
    let kueue = if on { json!({}) } else { json!(null) };
    for worker in set.workers() {
        clusters
            .patch(
                &worker.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"kueue": kueue}})),
            )
            .await?;
    }
    Ok(())
}

/// The worker's kubeconfig with its certificates inline, as MultiKueue reads
/// it from a Secret (no file paths).
fn inline_kubeconfig(worker: &ClusterInfo) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(&worker.kubeconfig)?;
    let mut config: serde_json::Value = serde_yaml_ng::from_str(&text)?;
    let base = worker.kubeconfig.parent().unwrap_or(Path::new("."));
    let inline = |object: &mut serde_json::Value, field: &str| -> anyhow::Result<()> {
        let Some(path) = object
            .get(field)
            .and_then(|p| p.as_str())
            .map(str::to_string)
        else {
            return Ok(());
        };
        let bytes = std::fs::read(base.join(&path))?;
        let map = object.as_object_mut().expect("an object");
        map.remove(field);
        map.insert(format!("{field}-data"), json!(base64(&bytes)));
        Ok(())
    };
    for cluster in config["clusters"].as_array_mut().into_iter().flatten() {
        inline(&mut cluster["cluster"], "certificate-authority")?;
    }
    for user in config["users"].as_array_mut().into_iter().flatten() {
        inline(&mut user["user"], "client-certificate")?;
        inline(&mut user["user"], "client-key")?;
    }
    Ok(serde_yaml_ng::to_string(&config)?)
}

fn base64(bytes: &[u8]) -> String {
    serde_json::to_value(k8s_openapi::ByteString(bytes.to_vec()))
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
