//! The `WorkerClusterSet` custom resource: a named list of WorkerClusters,
//! which a Kueue AdmissionCheck answered by jobrelay names in its
//! `parameters` to keep its ClusterQueues' Workloads on those clusters (what
//! `MultiKueueConfig` is to MultiKueue).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// WorkerClusters that Workloads of an AdmissionCheck may be placed on.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "jobrelay.dev",
    version = "v1alpha1",
    kind = "WorkerClusterSet",
    shortname = "wcs",
    printcolumn = r#"{"name":"Clusters","type":"string","jsonPath":".spec.clusters"}"#,
    printcolumn = r#"{"name":"Placement","type":"string","jsonPath":".spec.placement"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WorkerClusterSetSpec {
    /// Names of WorkerClusters.
    #[schemars(length(min = 1))]
    pub clusters: Vec<String>,
    /// How a Workload's cluster is chosen among them.
    #[serde(default)]
    pub placement: SetPlacement,
}

/// How a cluster of a [`WorkerClusterSet`] is chosen for a Workload; of
/// those where its Pods fit now, either way.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SetPlacement {
    /// The one with the most room left of what the Job asks most of.
    #[default]
    MostRoom,
    /// The first in `clusters`' order: each is filled before the next is
    /// used.
    InOrder,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_is_cluster_scoped_with_a_short_name() {
        use kube::CustomResourceExt;
        let crd = WorkerClusterSet::crd();
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.short_names, Some(vec!["wcs".to_string()]));
    }

    #[test]
    fn a_set_without_a_placement_fills_by_room_and_a_wrong_one_is_refused() {
        let spec: WorkerClusterSetSpec =
            serde_json::from_value(serde_json::json!({"clusters": ["w1"]})).expect("a spec");
        assert_eq!(spec.placement, SetPlacement::MostRoom);
        let in_order = serde_json::json!({"clusters": ["w1"], "placement": "InOrder"});
        let spec: WorkerClusterSetSpec = serde_json::from_value(in_order).expect("a spec");
        assert_eq!(spec.placement, SetPlacement::InOrder);
        let wrong = serde_json::json!({"clusters": ["w1"], "placement": "Random"});
        assert!(serde_json::from_value::<WorkerClusterSetSpec>(wrong).is_err());
    }
}
