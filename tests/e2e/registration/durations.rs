//! One duration grammar: every example value is accepted by the manager
//! cluster's API server in a WorkerCluster (the CRD's pattern and CEL rules)
//! exactly when the manager reads it — parsed, and for `lostAfter` and
//! `fenceAfter` leaving the agent time to fence — so a value is never stored
//! and then quietly replaced by a default.

use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_proto::duration::EXAMPLES;
use jobrelay_testbed::kit;
use kube::api::{Api, PostParams};

/// A WorkerCluster whose `field` (under `spec`) is `value`.
fn with(index: usize, field: &str, value: &str) -> WorkerCluster {
    let spec = match field {
        "admitWithin" => serde_json::json!({"kueue": {"admitWithin": value}}),
        field => serde_json::json!({ field: value }),
    };
    serde_json::from_value(serde_json::json!({
        "apiVersion": "jobrelay.dev/v1alpha1",
        "kind": "WorkerCluster",
        "metadata": {"name": format!("durations-{index}")},
        "spec": spec,
    }))
    .expect("a WorkerCluster")
}

/// Whether the manager reads the WorkerCluster's durations.
fn read(cluster: &WorkerCluster) -> Result<(), String> {
    cluster.fencing().map_err(|e| e.to_string())?;
    cluster.worker_queue().map_err(|e| e.to_string())?;
    Ok(())
}

/// Whether the API server stores `cluster`, in a dry run.
async fn stored(api: &Api<WorkerCluster>, cluster: &WorkerCluster) -> bool {
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match api.create(&dry_run, cluster).await {
        Ok(_) => true,
        Err(kube::Error::Api(status)) if status.code == 422 => false,
        Err(error) => panic!("creating a WorkerCluster {:?}: {error}", cluster.spec),
    }
}

#[tokio::test]
async fn the_crd_accepts_a_duration_exactly_when_the_manager_reads_it() {
    let (clusters, _relay) = kit::relay().await;
    let api: Api<WorkerCluster> = Api::all(kit::client(clusters.manager()).await);
    let mut disagreements = Vec::new();
    for field in ["lostAfter", "fenceAfter", "admitWithin"] {
        for (index, value) in EXAMPLES.iter().enumerate() {
            let cluster = with(index, field, value);
            let read = read(&cluster);
            if stored(&api, &cluster).await != read.is_ok() {
                disagreements.push(format!("{field} {value:?}: the manager says {read:?}"));
            }
        }
    }
    assert!(
        disagreements.is_empty(),
        "the CRD and the manager disagree:\n  {}",
        disagreements.join("\n  ")
    );
}
