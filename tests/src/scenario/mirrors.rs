//! A scenario's mirrors on the workers: which workers hold one for each
//! origin UID, how often each was created (from the agents' logs), the
//! worker a Job was assigned, and a mirror's Pods.

use std::collections::BTreeMap;
use std::time::Duration;

use jobrelay_proto::wire::{CLUSTER_KEY, ORIGIN_LABEL, ORIGIN_UID_LABEL};
use jobrelay_testbed::cluster::ClusterInfo;
use jobrelay_testbed::kit;
use jobrelay_testbed::wait::{self, Seen, WAIT};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::Scenario;

impl Scenario {
    /// Live mirror Jobs of this namespace by origin UID: the workers holding one.
    pub async fn mirrors(&self) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
        let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let selector =
            ListParams::default().labels(&format!("{ORIGIN_LABEL}={}", self.relay.origin));
        for worker in self.clusters.workers() {
            let jobs: Api<Job> = Api::namespaced(worker.client().await?, &self.ns);
            for job in jobs.list_metadata(&selector).await? {
                if job.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                if let Some(uid) = job.labels().get(ORIGIN_UID_LABEL) {
                    found
                        .entry(uid.clone())
                        .or_default()
                        .push(worker.name.clone());
                }
            }
        }
        Ok(found)
    }

    /// How often each origin UID's mirror was created in this namespace,
    /// over every agent's whole log (restarts included).
    pub fn creations(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for worker in self.clusters.workers() {
            for line in self.relay.agent_log(&worker.name).lines() {
                if !line.contains("mirror created") || field(line, "namespace") != Some(&self.ns) {
                    continue;
                }
                if let Some(uid) = field(line, "uid") {
                    *counts.entry(uid.to_string()).or_default() += 1;
                }
            }
        }
        counts
    }

    /// Waits until at least `n` mirrors of the scenario exist on the workers
    /// at once.
    pub async fn wait_mirrors(&self, n: usize, timeout: Duration) {
        wait::until(format!("{n} mirrors on the workers"), timeout, || async {
            match self.mirrors().await {
                Ok(mirrors) if mirrors.len() >= n => Seen::Ready(()),
                Ok(mirrors) => Seen::Waiting(format!("{} mirrors", mirrors.len())),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        })
        .await
    }

    /// Fails unless every mirror of this namespace was created at most `at_most` times.
    pub fn assert_created_at_most(&self, at_most: usize) {
        let twice: Vec<(String, usize)> = self
            .creations()
            .into_iter()
            .filter(|(_, n)| *n > at_most)
            .collect();
        assert!(
            twice.is_empty(),
            "mirrors created more than {at_most} time(s): {twice:?}"
        );
    }

    /// Waits until the manager Job names its cluster, and returns that worker.
    pub async fn assigned_worker(&self, name: &str) -> &'static ClusterInfo {
        let cluster = wait::until(
            format!("Job {name} assigned to a cluster"),
            WAIT,
            || async {
                match self.jobs.get(name).await {
                    Ok(job) => match job.annotations().get(CLUSTER_KEY) {
                        Some(cluster) => Seen::Ready(cluster.clone()),
                        None => Seen::Waiting(format!("annotations {:?}", job.annotations())),
                    },
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await;
        self.worker(&cluster)
    }

    /// Waits until the mirror's Pods on `worker` are all `phase` (`n` of them).
    pub async fn wait_worker_pods(
        &self,
        worker: &ClusterInfo,
        uid: &str,
        n: usize,
        phase: &str,
    ) -> Vec<Pod> {
        let pods: Api<Pod> = Api::namespaced(kit::client(worker).await, &self.ns);
        let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
        wait::until(
            format!("{n} Pod(s) of mirror {uid} on {} {phase}", worker.name),
            WAIT,
            || {
                let (pods, selector) = (pods.clone(), selector.clone());
                async move {
                    match pods.list(&selector).await {
                        Ok(list)
                            if list.items.len() == n
                                && list.items.iter().all(|p| pod_phase(p) == phase) =>
                        {
                            Seen::Ready(list.items)
                        }
                        Ok(list) => Seen::Waiting(format!(
                            "{:?}",
                            list.items.iter().map(pod_phase).collect::<Vec<_>>()
                        )),
                        Err(e) => Seen::Waiting(e.to_string()),
                    }
                }
            },
        )
        .await
    }
}

/// A Pod's phase, `+Terminating` once it is being deleted.
fn pod_phase(pod: &Pod) -> String {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    if pod.metadata.deletion_timestamp.is_some() {
        format!("{phase}+Terminating")
    } else {
        phase
    }
}

/// The value of `name=value` in a log line.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!(" {name}="))? + name.len() + 2;
    line[start..].split_whitespace().next()
}
