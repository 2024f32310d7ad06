//! What a fault scenario works with: its namespace on every cluster, the
//! manager's Job API, and the checks such scenarios end with — each Job's
//! outcome, no mirror created twice or live on two clusters, a clean leak
//! check.

use std::collections::BTreeMap;
use std::time::Duration;

use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_proto::wire::MANAGED_BY;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

use jobrelay_testbed::cluster::ClusterInfo;
use jobrelay_testbed::kit::{self, Clusters};
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::objects::leaks::assert_no_leaks;
use jobrelay_testbed::relay::Relay;
use jobrelay_testbed::wait::{self, Seen};

mod cut_off;
mod job_waits;
mod kueue;
mod mirrors;
mod outcome;
mod stranded;

pub use cut_off::CutOff;
pub use job_waits::wait_given_managed_by;
pub use kueue::{
    apply_set, check_of_set, drop_check_of_set, live_worker_pods, quota_back_to_zero,
    worker_pods_of, workload_of,
};
pub use outcome::{condition, has_condition, outcome};
pub use stranded::StrandingNode;

pub struct Scenario {
    pub clusters: &'static Clusters,
    pub relay: &'static Relay,
    pub ns: String,
    /// Manager Jobs of the scenario's namespace.
    pub jobs: Api<Job>,
}

pub use jobrelay_testbed::wait::WAIT;

impl Scenario {
    /// A fresh namespace on every cluster of the test process's relay
    /// (started on first use).
    pub async fn relayed(prefix: &str) -> Self {
        let (clusters, relay) = kit::relay().await;
        Scenario::new(clusters, relay, prefix).await
    }

    /// A fresh namespace, on the manager and every worker.
    pub async fn new(clusters: &'static Clusters, relay: &'static Relay, prefix: &str) -> Self {
        let ns = kit::namespace_everywhere(clusters, prefix).await;
        let jobs = Api::namespaced(kit::client(clusters.manager()).await, &ns);
        Scenario {
            clusters,
            relay,
            ns,
            jobs,
        }
    }

    /// The worker cluster named `name`.
    pub fn worker(&self, name: &str) -> &'static ClusterInfo {
        self.clusters
            .workers()
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no worker {name}"))
    }

    /// The scenario's namespace of `K` on the worker named `name`.
    pub async fn worker_api<K>(&self, name: &str) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(kit::client(self.worker(name)).await, &self.ns)
    }

    /// Merges `spec` into the `spec` of WorkerCluster `cluster` (a field
    /// set to null is removed).
    pub async fn set_worker_cluster(&self, cluster: &str, spec: serde_json::Value) {
        let clusters: Api<WorkerCluster> = Api::all(kit::client(self.clusters.manager()).await);
        let patch = serde_json::json!({ "spec": spec });
        clusters
            .patch(cluster, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("patching WorkerCluster {cluster}'s spec with {spec}: {e}"));
    }

    /// A relayed Job in the scenario's namespace.
    pub fn job(&self, name: &str) -> TestJob {
        TestJob::new(&self.ns, name).managed_by(MANAGED_BY)
    }

    /// Creates the Job on the manager; returns its UID.
    pub async fn create(&self, job: TestJob) -> String {
        let created = self
            .jobs
            .create(&PostParams::default(), &job.build())
            .await
            .unwrap_or_else(|e| panic!("creating a manager Job: {e}"));
        created.uid().unwrap_or_default()
    }

    /// Creates `n` Jobs named `<prefix>-<i>` running `run_for`, one in five
    /// failing; returns the outcome each must reach.
    pub async fn create_jobs(
        &self,
        prefix: &str,
        n: usize,
        run_for: &str,
    ) -> BTreeMap<String, &'static str> {
        let mut expected = BTreeMap::new();
        for i in 0..n {
            let name = format!("{prefix}-{i}");
            let failing = i % 5 == 4;
            let mut job = self.job(&name).run_for(run_for);
            if failing {
                job = job.failing();
            }
            self.create(job).await;
            expected.insert(name, if failing { "Failed" } else { "Complete" });
        }
        expected
    }

    /// Deletes every manager Job, waits until all are gone, and runs the leak check.
    pub async fn finish(&self, timeout: Duration) {
        let names: Vec<String> = self
            .jobs
            .list(&ListParams::default())
            .await
            .map(|l| l.items.iter().map(ResourceExt::name_any).collect())
            .unwrap_or_default();
        for name in &names {
            let _ = self.jobs.delete(name, &DeleteParams::background()).await;
        }
        wait::until(
            "every manager Job of the scenario gone",
            timeout,
            || async {
                match self.jobs.list(&ListParams::default()).await {
                    Ok(list) if list.items.is_empty() => Seen::Ready(()),
                    Ok(list) => Seen::Waiting(format!(
                        "{} left, e.g. {:?}",
                        list.items.len(),
                        list.items
                            .first()
                            .map(|j| (j.name_any(), j.finalizers().to_vec()))
                    )),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await;
        assert_no_leaks(self.clusters.set(), &self.relay.origin, &self.ns).await;
    }
}
