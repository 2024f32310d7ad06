//! The demo's view of its worker clusters: the demo namespace's Jobs, Pods
//! and JobSets on each.

use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::wire::ORIGIN_UID_LABEL;
use jobrelay_testbed::cluster::{ClusterInfo, ClusterSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use super::{NAMESPACE, describe};

pub(super) struct Workers {
    clusters: Vec<Worker>,
}

/// One worker cluster, with the APIs of the demo's namespace there.
struct Worker {
    cluster: ClusterInfo,
    jobs: Api<Job>,
    pods: Api<Pod>,
    jobsets: Api<JobSet>,
}

impl Workers {
    pub(super) async fn connect(set: &ClusterSet) -> anyhow::Result<Self> {
        let mut clusters = Vec::new();
        for worker in set.workers() {
            let client = worker.client().await?;
            clusters.push(Worker {
                cluster: worker.clone(),
                jobs: Api::namespaced(client.clone(), NAMESPACE),
                pods: Api::namespaced(client.clone(), NAMESPACE),
                jobsets: Api::namespaced(client, NAMESPACE),
            });
        }
        Ok(Workers { clusters })
    }

    /// The worker Job's state and the number of Pods of `uid` on `cluster`.
    pub(super) async fn remote(
        &self,
        cluster: &str,
        name: &str,
        uid: &str,
    ) -> anyhow::Result<(String, String)> {
        let Some(worker) = self.get(cluster) else {
            return Ok(("unknown cluster".into(), "-".into()));
        };
        let pods = self.pods_of(cluster, uid).await?;
        let state = match worker.jobs.get_opt(name).await? {
            None => "Job gone".to_string(),
            Some(job) => describe(&job),
        };
        Ok((state, pods))
    }

    /// The number of Pods of `uid` on `cluster`, terminating ones said so.
    pub(super) async fn pods_of(&self, cluster: &str, uid: &str) -> anyhow::Result<String> {
        let Some(worker) = self.get(cluster) else {
            return Ok("-".into());
        };
        let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
        let pods = worker.pods.list(&selector).await?.items;
        let terminating = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .count();
        Ok(match terminating {
            0 => pods.len().to_string(),
            n => format!("{} ({n} terminating)", pods.len()),
        })
    }

    /// The mirror of the JobSet `name` on `cluster`, if there is one.
    pub(super) async fn jobset(&self, cluster: &str, name: &str) -> anyhow::Result<Option<JobSet>> {
        match self.get(cluster) {
            Some(worker) => Ok(worker.jobsets.get_opt(name).await?),
            None => Ok(None),
        }
    }

    fn get(&self, cluster: &str) -> Option<&Worker> {
        self.clusters.iter().find(|w| w.cluster.name == cluster)
    }
}
