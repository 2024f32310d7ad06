//! The state of a cluster's link, as the fleet keeps it for the
//! WorkerCluster status.

use k8s_openapi::jiff::Timestamp;

/// The state of one cluster's link, for its WorkerCluster status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    pub connected: bool,
    /// When the last session opened or closed; `None` if none did since start.
    pub since: Option<Timestamp>,
    pub agent_version: String,
    pub last_heard: Option<Timestamp>,
    pub active_mirrors: u32,
}
