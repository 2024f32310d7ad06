//! The leak check every relay scenario ends with: on every worker, nothing of
//! the origin is left in the scenario's namespace — no Job, no Pod carrying
//! the origin label — and no Pod whose owning Job is gone.

use std::collections::HashSet;

use jobrelay_proto::wire::ORIGIN_LABEL;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::cluster::ClusterSet;

/// Everything left behind, one line each; empty when clean.
pub async fn leaks(
    clusters: &ClusterSet,
    origin: &str,
    namespace: &str,
) -> anyhow::Result<Vec<String>> {
    let mut found = Vec::new();
    let labelled = ListParams::default().labels(&format!("{ORIGIN_LABEL}={origin}"));
    for worker in clusters.workers() {
        let client = worker.client().await?;
        let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
        let pods: Api<Pod> = Api::namespaced(client, namespace);
        for job in jobs.list(&labelled).await? {
            found.push(format!(
                "{}: Job {namespace}/{} of origin {origin}",
                worker.name,
                job.name_any()
            ));
        }
        for pod in pods.list(&labelled).await? {
            found.push(format!(
                "{}: Pod {namespace}/{} ({}) of origin {origin}",
                worker.name,
                pod.name_any(),
                describe(&pod)
            ));
        }
        let live_jobs: HashSet<String> = jobs
            .list(&ListParams::default())
            .await?
            .into_iter()
            .filter_map(|j| j.uid())
            .collect();
        for pod in pods.list(&ListParams::default()).await? {
            let orphaned = pod
                .owner_references()
                .iter()
                .any(|o| o.kind == "Job" && !live_jobs.contains(&o.uid));
            if orphaned {
                found.push(format!(
                    "{}: Pod {namespace}/{} ({}) whose Job is gone",
                    worker.name,
                    pod.name_any(),
                    describe(&pod)
                ));
            }
        }
    }
    Ok(found)
}

/// Fails the test, listing every leak, unless the workers are clean.
pub async fn assert_no_leaks(clusters: &ClusterSet, origin: &str, namespace: &str) {
    let found = leaks(clusters, origin, namespace)
        .await
        .unwrap_or_else(|e| panic!("leak check failed to run: {e:#}"));
    assert!(
        found.is_empty(),
        "leak check of namespace {namespace} found:\n  {}",
        found.join("\n  ")
    );
}

fn describe(pod: &Pod) -> String {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Unknown".into());
    if pod.metadata.deletion_timestamp.is_some() {
        format!("{phase}, Terminating")
    } else {
        phase
    }
}
