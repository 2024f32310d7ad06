//! One duration grammar: every example value is accepted by the manager
//! cluster's API server in a WorkerCluster (the CRD's pattern and CEL rule)
//! exactly when the manager's parser reads it, so a value is never stored
//! and then quietly replaced by a default.

use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_proto::duration::{EXAMPLES, parse};
use jobrelay_testbed::kit;
use kube::api::{Api, PostParams};

/// Whether the API server stores a WorkerCluster whose `field` (under
/// `spec`, dotted) is `value`, in a dry run.
async fn stored(api: &Api<WorkerCluster>, index: usize, field: &str, value: &str) -> bool {
    let spec = match field {
        "lostAfter" => serde_json::json!({"lostAfter": value}),
        _ => serde_json::json!({"kueue": {"admitWithin": value}}),
    };
    let cluster: WorkerCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "jobrelay.dev/v1alpha1",
        "kind": "WorkerCluster",
        "metadata": {"name": format!("durations-{index}")},
        "spec": spec,
    }))
    .expect("a WorkerCluster");
    match api
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &cluster,
        )
        .await
    {
        Ok(_) => true,
        Err(kube::Error::Api(status)) if status.code == 422 => false,
        Err(error) => panic!("creating a WorkerCluster with {field} {value:?}: {error}"),
    }
}

#[tokio::test]
async fn the_crd_accepts_a_duration_exactly_when_the_manager_reads_it() {
    let (clusters, _relay) = kit::relay().await;
    let api: Api<WorkerCluster> = Api::all(kit::client(clusters.manager()).await);
    let mut disagreements = Vec::new();
    for field in ["lostAfter", "admitWithin"] {
        for (index, value) in EXAMPLES.iter().enumerate() {
            let read = parse(value);
            if stored(&api, index, field, value).await != read.is_ok() {
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
