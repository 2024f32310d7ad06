//! The leak check every relay scenario ends with: on every worker, nothing of
//! the origin is left in the scenario's namespace — no JobSet (where the
//! worker serves them), no Job, no Pod carrying the origin label — and no
//! Pod whose owning Job is gone.

use std::collections::HashSet;
use std::fmt;

use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::wire::ORIGIN_LABEL;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::cluster::ClusterSet;

/// One object left behind on a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    pub cluster: String,
    /// `JobSet`, `Job` or `Pod`.
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub why: String,
}

impl fmt::Display for Leak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} {}/{} ({})",
            self.cluster, self.kind, self.namespace, self.name, self.why
        )
    }
}

/// Everything left behind in `namespace` on any worker; empty when clean.
pub async fn leaks(
    clusters: &ClusterSet,
    origin: &str,
    namespace: &str,
) -> anyhow::Result<Vec<Leak>> {
    let mut found = Vec::new();
    let labelled = ListParams::default().labels(&format!("{ORIGIN_LABEL}={origin}"));
    for worker in clusters.workers() {
        let client = worker.client().await?;
        let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let leak = |kind, name: String, why: String| Leak {
            cluster: worker.name.clone(),
            kind,
            namespace: namespace.into(),
            name,
            why,
        };
        let jobsets: Api<JobSet> = Api::namespaced(client, namespace);
        match jobsets.list(&labelled).await {
            Ok(list) => {
                for jobset in list {
                    found.push(leak(
                        "JobSet",
                        jobset.name_any(),
                        format!("origin {origin}"),
                    ));
                }
            }
            // The worker does not serve JobSets.
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
        for job in jobs.list(&labelled).await? {
            found.push(leak("Job", job.name_any(), format!("origin {origin}")));
        }
        let live_jobs: HashSet<String> = jobs
            .list(&ListParams::default())
            .await?
            .into_iter()
            .filter_map(|j| j.uid())
            .collect();
        for pod in pods.list(&ListParams::default()).await? {
            let ours = pod.labels().get(ORIGIN_LABEL).map(String::as_str) == Some(origin);
            let orphaned = pod
                .owner_references()
                .iter()
                .any(|o| o.kind == "Job" && !live_jobs.contains(&o.uid));
            if ours || orphaned {
                let why = if ours {
                    format!("origin {origin}")
                } else {
                    "its Job is gone".into()
                };
                found.push(leak(
                    "Pod",
                    pod.name_any(),
                    format!("{}, {why}", describe(&pod)),
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
    let lines: Vec<String> = found.iter().map(Leak::to_string).collect();
    assert!(
        found.is_empty(),
        "leak check of namespace {namespace} found:\n  {}",
        lines.join("\n  ")
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
