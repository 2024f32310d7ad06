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
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WorkerClusterSetSpec {
    /// Names of WorkerClusters.
    #[schemars(length(min = 1))]
    pub clusters: Vec<String>,
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
}
