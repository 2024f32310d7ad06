//! A Pod stuck Terminating on a node that stopped answering: it holds its
//! deleted Job (the manager's finalizer waits for every Pod), and the Job
//! says which Pod on which node holds it, until the WorkerCluster opts in
//! with `terminatingPodTimeout`; then the agent force-deletes it and the
//! Job goes.

use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_proto::wire::{CLUSTER_KEY, ORIGIN_UID_LABEL};
use jobrelay_testbed::cluster::down::stop_answering;
use jobrelay_testbed::cluster::pools::{self, NodePool};
use jobrelay_testbed::kit;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use std::time::Duration;

const WORKER: &str = "worker-1";
/// The taint that keeps other scenarios' Pods off the scenario's node.
const TAINT: &str = "test.jobrelay.dev/stops-answering";

/// Sets the worker's `spec.terminatingPodTimeout` (`None`: off).
async fn set_timeout(s: &Scenario, timeout: Option<&str>) {
    let clusters: Api<WorkerCluster> = Api::all(kit::client(s.clusters.manager()).await);
    let patch = serde_json::json!({"spec": {"terminatingPodTimeout": timeout}});
    clusters
        .patch(WORKER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching WorkerCluster {WORKER}: {e}"));
}

/// The mirror's Pods on the worker.
async fn pods_of(pods: &Api<Pod>, uid: &str) -> Vec<Pod> {
    let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
    pods.list(&selector)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// Waits until the manager Job `stranded` is gone, within `within`.
async fn manager_job_gone(s: &Scenario, within: Duration) -> Result<(), wait::Timeout> {
    wait::try_until("the manager Job gone", within, || async {
        match s.jobs.get_opt("stranded").await {
            Ok(None) => Seen::Ready(()),
            Ok(Some(job)) => Seen::Waiting(format!("finalizers {:?}", job.metadata.finalizers)),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await
}

#[tokio::test]
async fn a_pod_stuck_terminating_on_a_node_that_stopped_answering_is_forced_once_opted_in() {
    let s = Scenario::relayed("stuck-pod").await;
    let worker = kit::client(s.worker(WORKER)).await;
    let pool = NodePool::new(&format!("down-{}", s.ns), 1).taint(TAINT, &s.ns, "NoSchedule");
    let node = pools::add_node(&worker, &pool, 0)
        .await
        .unwrap_or_else(|e| panic!("a node of its own: {e}"));
    let uid = s
        .create(
            s.job("stranded")
                .label(CLUSTER_KEY, WORKER)
                .node_selector("kubernetes.io/hostname", &node)
                .tolerate(TAINT, &s.ns, "NoSchedule")
                .grace_period(1)
                // Were kwok still to act on the node, the deleted Pod
                // would stay Terminating all the same.
                .terminate_after("1h")
                .run_for("1h"),
        )
        .await;
    let pods: Api<Pod> = Api::namespaced(worker.clone(), &s.ns);
    wait::until(format!("the Pod running on {node}"), WAIT, || async {
        let running = pods_of(&pods, &uid)
            .await
            .into_iter()
            .any(|pod| pod.status.and_then(|s| s.phase).as_deref() == Some("Running"));
        match running {
            true => Seen::Ready(()),
            false => Seen::Waiting("not Running".into()),
        }
    })
    .await;

    stop_answering(&worker, &node)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    s.jobs
        .delete("stranded", &DeleteParams::background())
        .await
        .expect("delete the manager Job");
    wait::until("the Pod Terminating, its grace over", WAIT, || async {
        let pods = pods_of(&pods, &uid).await;
        let overdue = pods.iter().any(|pod| {
            pod.metadata
                .deletion_timestamp
                .as_ref()
                .is_some_and(|due| due.0 <= Timestamp::now())
        });
        match overdue {
            true => Seen::Ready(()),
            false => Seen::Waiting(format!("{} Pods, none overdue", pods.len())),
        }
    })
    .await;
    // Off: nothing removes it, the manager Job waits for it, and says why.
    let pod = pods_of(&pods, &uid)
        .await
        .remove(0)
        .metadata
        .name
        .unwrap_or_default();
    let why = s.wait_event("stranded", "PodsStuckTerminating").await;
    for part in [
        format!(
            "1 Pod of the Job on cluster {WORKER} is held Terminating on a node that is not Ready: {pod} on node {node}"
        ),
        "node.kubernetes.io/out-of-service".to_string(),
        format!("set WorkerCluster {WORKER} spec.terminatingPodTimeout"),
    ] {
        assert!(why.contains(&part), "{part:?} in {why:?}");
    }
    let held = manager_job_gone(&s, Duration::from_secs(8)).await;
    assert!(held.is_err(), "the Job went while its Pod was Terminating");
    assert_eq!(pods_of(&pods, &uid).await.len(), 1, "still Terminating");

    // Opted in: the agent forces it, and the Job is released.
    set_timeout(&s, Some("3s")).await;
    manager_job_gone(&s, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pods_of(&pods, &uid).await.len(), 0, "the Pod was forced");
    set_timeout(&s, None).await;
    pools::remove_pool(&worker, &pool)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    s.finish(WAIT).await;
}
