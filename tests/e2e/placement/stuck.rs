//! A mirror that cannot start is moved: a Job whose Pods select a node
//! only worker-2 has (placement weighs pools, not hostnames; the
//! scheduler does not) is placed on roomier worker-1, where the scheduler
//! finds no node for its Pod; after worker-1's `unschedulableTimeout` the
//! mirror is withdrawn, Pods first, with a warning saying why, and the Job
//! runs to completion on worker-2.

use std::collections::BTreeMap;

use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_testbed::cluster::pools::NodePool;
use jobrelay_testbed::kit;
use kube::api::{Api, Patch, PatchParams};

use super::{Fleet, TIMEOUT, placed_on, small};

/// The wait worker-1 allows a mirror's Pods with no node found.
const SHORT_TIMEOUT: &str = "10s";

/// Sets `cluster`'s `spec.unschedulableTimeout` (`None`: the default).
async fn set_unschedulable_timeout(fleet: &Fleet, cluster: &str, timeout: Option<&str>) {
    let clusters: Api<WorkerCluster> =
        Api::all(kit::client(fleet.scenario.clusters.manager()).await);
    let patch = serde_json::json!({"spec": {"unschedulableTimeout": timeout}});
    clusters
        .patch(cluster, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching WorkerCluster {cluster}: {e}"));
}

/// The type (`Normal`, `Warning`) of the Events of `reason` on the manager
/// Job `name`.
async fn event_types(fleet: &Fleet, name: &str, reason: &str) -> Vec<String> {
    let events = fleet.scenario.events_on(name).await;
    events
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| e.type_.unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mirror_whose_pods_find_no_node_moves_to_a_cluster_where_they_do() {
    let roomy = NodePool::new("stuck-1", 1).cpu("16").memory("64Gi");
    let only_here = small("stuck-2");
    let fleet = Fleet::start("stuck", [vec![roomy], vec![only_here.clone()]]).await;
    set_unschedulable_timeout(&fleet, "worker-1", Some(SHORT_TIMEOUT)).await;
    let s = &fleet.scenario;

    // One CPU fits both workers; the node it selects is worker-2's alone.
    let node = only_here.node_name(0);
    s.create(
        s.job("picky")
            .cpu("1")
            .node_selector("kubernetes.io/hostname", &node)
            .run_for("2s"),
    )
    .await;
    let why = s.wait_event("picky", "MirrorUnschedulable").await;
    for part in [
        "found no node on cluster worker-1",
        "its unschedulableTimeout is 10s",
        "none of them ever ran",
        "node affinity/selector",
        "cluster worker-1 tried last",
    ] {
        assert!(why.contains(part), "{part:?} in {why:?}");
    }
    assert_eq!(
        event_types(&fleet, "picky", "MirrorUnschedulable").await,
        ["Warning"]
    );
    s.wait_event("picky", "MirrorWithdrawn").await;
    s.wait_outcomes(
        &BTreeMap::from([("picky".to_string(), "Complete")]),
        TIMEOUT,
    )
    .await;
    assert_eq!(placed_on(s, "picky").await.as_deref(), Some("worker-2"));

    set_unschedulable_timeout(&fleet, "worker-1", None).await;
    fleet.finish().await;
}
