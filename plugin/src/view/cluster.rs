//! A WorkerCluster (`jobrelay.dev/v1alpha1`, cluster-scoped) as `clusters`
//! shows it: a view of the few fields shown, read from the object as the
//! API server returns it, so the plugin needs nothing of the manager's own
//! type.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::quantity;

/// The API group, version and plural of WorkerClusters.
pub const GROUP: &str = "jobrelay.dev";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "WorkerCluster";
pub const PLURAL: &str = "workerclusters";

/// The fields of a WorkerCluster the plugin reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WorkerCluster {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<WorkerClusterStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerClusterStatus {
    #[serde(default)]
    pub active_mirrors: Option<u32>,
    #[serde(default)]
    pub agent_version: Option<String>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub last_heartbeat_time: Option<Time>,
    #[serde(default)]
    pub queues: Vec<WorkerQueue>,
    #[serde(default)]
    pub room: Option<Vec<NodePool>>,
}

/// A ClusterQueue of the worker's own Kueue.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WorkerQueue {
    pub name: String,
}

/// One node pool's room, as the agent reported it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodePool {
    #[serde(default)]
    pub nodes: u32,
    #[serde(default)]
    pub free: BTreeMap<String, String>,
}

/// A row of `clusters`, with stable field names for `-o json|yaml`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRow {
    pub name: String,
    /// The `Connected` condition's status (`True`, `False`, `Unknown`);
    /// `None` before the manager wrote one.
    pub connected: Option<String>,
    /// Why, as the `Connected` condition says.
    pub message: Option<String>,
    /// The `Lost` condition is `True`: the cluster gets no new Jobs.
    pub lost: bool,
    pub agent_version: Option<String>,
    pub mirrors: u32,
    /// What the agent last reported of its room; `None` while it reports
    /// none.
    pub room: Option<Room>,
    /// The worker's own Kueue ClusterQueues the agent reads.
    pub queues: Vec<String>,
    pub last_heartbeat: Option<Timestamp>,
    pub created: Option<Timestamp>,
}

/// The room a worker reported, summed over its node pools.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Room {
    pub pools: usize,
    pub nodes: u32,
    /// Free of each resource over all pools, for a person (`12`, `47.5Gi`).
    pub free: BTreeMap<String, String>,
}

impl Room {
    /// `5 nodes in 2 pools`.
    pub fn summary(&self) -> String {
        let nodes = match self.nodes {
            1 => "1 node".to_string(),
            n => format!("{n} nodes"),
        };
        let pools = match self.pools {
            1 => "1 pool".to_string(),
            n => format!("{n} pools"),
        };
        format!("{nodes} in {pools}")
    }

    /// `cpu 12, memory 47.5Gi`.
    pub fn free_summary(&self) -> String {
        let free: Vec<String> = self
            .free
            .iter()
            .map(|(resource, amount)| format!("{resource} {amount}"))
            .collect();
        match free.is_empty() {
            true => "-".into(),
            false => free.join(", "),
        }
    }
}

impl ClusterRow {
    /// The CONNECTED column: the condition's status, and `(Lost)` once the
    /// cluster is Lost.
    pub fn connected_cell(&self) -> String {
        let connected = self.connected.as_deref().unwrap_or("Unknown");
        match self.lost {
            true => format!("{connected} (Lost)"),
            false => connected.into(),
        }
    }
}

/// The row of `cluster`.
pub fn row(cluster: &WorkerCluster) -> ClusterRow {
    let status = cluster.status.clone().unwrap_or_default();
    let condition = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_);
    let connected = condition("Connected");
    ClusterRow {
        name: cluster.metadata.name.clone().unwrap_or_default(),
        connected: connected.map(|c| c.status.clone()),
        message: connected
            .map(|c| c.message.clone())
            .filter(|m| !m.is_empty()),
        lost: condition("Lost").is_some_and(|c| c.status == "True"),
        agent_version: status.agent_version.clone(),
        mirrors: status.active_mirrors.unwrap_or(0),
        room: status.room.as_deref().map(room),
        queues: status.queues.iter().map(|q| q.name.clone()).collect(),
        last_heartbeat: status.last_heartbeat_time.as_ref().map(|t| t.0),
        created: cluster.metadata.creation_timestamp.as_ref().map(|t| t.0),
    }
}

fn room(pools: &[NodePool]) -> Room {
    let mut free: BTreeMap<&str, f64> = BTreeMap::new();
    for pool in pools {
        for (resource, amount) in &pool.free {
            if let Some(amount) = quantity::parse(amount) {
                *free.entry(resource).or_default() += amount;
            }
        }
    }
    Room {
        pools: pools.len(),
        nodes: pools.iter().map(|p| p.nodes).sum(),
        free: free
            .into_iter()
            .map(|(resource, amount)| (resource.to_string(), quantity::show(resource, amount)))
            .collect(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn worker_1() -> WorkerCluster {
        serde_json::from_value(json!({
            "apiVersion": "jobrelay.dev/v1alpha1",
            "kind": "WorkerCluster",
            "metadata": {"name": "worker-1", "creationTimestamp": "2026-11-26T12:00:00Z"},
            "spec": {"lostAfter": "15m"},
            "status": {
                "activeMirrors": 3,
                "agentVersion": "0.1.0",
                "lastHeartbeatTime": "2026-11-28T11:59:50Z",
                "conditions": [
                    {"type": "Connected", "status": "True", "reason": "SessionOpen", "message": "agent connected", "lastTransitionTime": "2026-11-28T10:00:00Z"},
                    {"type": "Lost", "status": "False", "reason": "Connected", "message": "", "lastTransitionTime": "2026-11-28T10:00:00Z"},
                ],
                "room": [
                    {"nodes": 3, "free": {"cpu": "10", "memory": "40Gi"}, "labels": {"pool": "cpu"}},
                    {"nodes": 2, "free": {"cpu": "1500m", "memory": "7680Mi", "nvidia.com/gpu": "4"}, "labels": {"pool": "gpu"}},
                ],
            },
        }))
        .expect("a WorkerCluster")
    }

    pub(crate) fn worker_2_lost() -> WorkerCluster {
        serde_json::from_value(json!({
            "metadata": {"name": "worker-2", "creationTimestamp": "2026-11-27T12:00:00Z"},
            "spec": {},
            "status": {
                "activeMirrors": 0,
                "lastHeartbeatTime": "2026-11-28T11:30:00Z",
                "conditions": [
                    {"type": "Connected", "status": "False", "reason": "SessionClosed", "message": "no session since 11:30", "lastTransitionTime": "2026-11-28T11:30:00Z"},
                    {"type": "Lost", "status": "True", "reason": "LostAfter", "message": "", "lastTransitionTime": "2026-11-28T11:45:00Z"},
                ],
            },
        }))
        .expect("a WorkerCluster")
    }

    #[test]
    fn a_connected_cluster_shows_its_agent_mirrors_and_room() {
        let shown = row(&worker_1());
        assert_eq!(shown.connected_cell(), "True");
        assert_eq!(shown.agent_version.as_deref(), Some("0.1.0"));
        assert_eq!(shown.mirrors, 3);
        let room = shown.room.expect("room reported");
        assert_eq!(room.summary(), "5 nodes in 2 pools");
        assert_eq!(
            room.free_summary(),
            "cpu 11500m, memory 47.5Gi, nvidia.com/gpu 4"
        );
    }

    #[test]
    fn a_lost_cluster_says_so_and_one_never_heard_from_reads_too() {
        let shown = row(&worker_2_lost());
        assert_eq!(shown.connected_cell(), "False (Lost)");
        assert_eq!(shown.message.as_deref(), Some("no session since 11:30"));
        assert_eq!(shown.room, None);
        let new: WorkerCluster =
            serde_json::from_value(json!({"metadata": {"name": "worker-3"}, "spec": {}}))
                .expect("a WorkerCluster");
        let shown = row(&new);
        assert_eq!(shown.connected_cell(), "Unknown");
        assert_eq!(shown.mirrors, 0);
    }
}
