//! The worker clusters as the manager knows them: the WorkerCluster and
//! WorkerClusterSet resources and their CRDs, which namespaces each admits
//! ([`registry`]), the status written back ([`status_writer`]), and the
//! agents' certificates judged and pinned.

pub mod agent_certificates;
pub mod certificate_pin;
pub mod crds;
pub mod fencing;
pub mod registry;
pub mod status_writer;
pub mod worker_cluster;
pub mod worker_cluster_set;
pub mod write_budget;

use prometheus_client::encoding::EncodeLabelSet;

/// The label of a per-cluster metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ByCluster {
    pub cluster: String,
}
