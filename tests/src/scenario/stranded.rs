//! A Pod stranded on a node that stops answering: a node of the scenario's
//! own on one worker (tainted, so no other scenario's Pod lands there), a
//! Job whose one Pod runs on it, the node taken from kwok, and the
//! WorkerCluster's `terminatingPodTimeout` that lets the agent force such
//! a Pod.

use jobrelay_proto::wire::{CLUSTER_KEY, ORIGIN_UID_LABEL};
use jobrelay_testbed::cluster::down::stop_answering;
use jobrelay_testbed::cluster::pools::{self, NodePool};
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::wait::{self, Seen, WAIT};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};

use super::Scenario;

/// The taint that keeps other scenarios' Pods off the node.
const TAINT: &str = "test.jobrelay.dev/stops-answering";

/// A node of the scenario's own on `worker`, that will stop answering.
pub struct StrandingNode {
    pub worker: &'static str,
    pub node: String,
    pool: NodePool,
    /// The scenario's namespace, the taint's value.
    ns: String,
    /// The worker's Pods in the scenario's namespace.
    pods: Api<Pod>,
    worker_client: kube::Client,
}

impl Scenario {
    /// A node of the scenario's own on `worker`, Ready for now.
    pub async fn stranding_node(&self, worker: &'static str) -> StrandingNode {
        let worker_client = kit::client(self.worker(worker)).await;
        let pool = NodePool::new(&format!("down-{}", self.ns), 1)
            .cpu("2")
            .memory("4Gi")
            .taint(TAINT, &self.ns, "NoSchedule");
        let node = pools::add_node(&worker_client, &pool, 0)
            .await
            .unwrap_or_else(|e| panic!("a node of its own on {worker}: {e}"));
        StrandingNode {
            worker,
            node,
            pool,
            ns: self.ns.clone(),
            pods: Api::namespaced(worker_client.clone(), &self.ns),
            worker_client,
        }
    }
}

impl StrandingNode {
    /// `job`, pinned to the worker and run on the node: one Pod with a
    /// grace period of a second, running for an hour. Were kwok still to
    /// act on the node, its deleted Pod would stay Terminating all the same.
    pub fn runs(&self, job: TestJob) -> TestJob {
        job.label(CLUSTER_KEY, self.worker)
            .node_selector("kubernetes.io/hostname", &self.node)
            .tolerate(TAINT, &self.ns, "NoSchedule")
            .grace_period(1)
            .terminate_after("1h")
            .run_for("1h")
    }

    /// The worker's Pods of mirror `uid`.
    pub async fn pods_of(&self, uid: &str) -> Vec<Pod> {
        let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
        self.pods
            .list(&selector)
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    }

    /// Waits until a Pod of mirror `uid` runs on the node, then has the
    /// node stop answering.
    pub async fn strand(&self, uid: &str) {
        wait::until(
            format!("the Pod running on {}", self.node),
            WAIT,
            || async {
                let running = self
                    .pods_of(uid)
                    .await
                    .into_iter()
                    .any(|pod| pod.status.and_then(|s| s.phase).as_deref() == Some("Running"));
                match running {
                    true => Seen::Ready(()),
                    false => Seen::Waiting("not Running".into()),
                }
            },
        )
        .await;
        stop_answering(&self.worker_client, &self.node)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Waits until the Pod of mirror `uid` is Terminating with its grace
    /// period over; its name.
    pub async fn overdue(&self, uid: &str) -> String {
        wait::until("the Pod Terminating, its grace over", WAIT, || async {
            let pods = self.pods_of(uid).await;
            let overdue = pods.iter().find(|pod| {
                pod.metadata
                    .deletion_timestamp
                    .as_ref()
                    .is_some_and(|due| due.0 <= Timestamp::now())
            });
            match overdue {
                Some(pod) => Seen::Ready(pod.metadata.name.clone().unwrap_or_default()),
                None => Seen::Waiting(format!("{} Pods, none overdue", pods.len())),
            }
        })
        .await
    }

    /// Sets the worker's `spec.terminatingPodTimeout` in scenario `s`
    /// (`None`: off).
    pub async fn set_timeout(&self, s: &Scenario, timeout: Option<&str>) {
        let spec = serde_json::json!({"terminatingPodTimeout": timeout});
        s.set_worker_cluster(self.worker, spec).await;
    }

    /// Turns the opt-in off again and removes the node.
    pub async fn remove(self, s: &Scenario) {
        self.set_timeout(s, None).await;
        pools::remove_pool(&self.worker_client, &self.pool)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
