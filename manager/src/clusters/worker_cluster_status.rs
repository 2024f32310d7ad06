//! What the manager shows of a worker cluster in its WorkerCluster's status:
//! the link's conditions, the room its agent last reported by node pool,
//! and its own Kueue's ClusterQueues.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the manager knows of the cluster's link.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerClusterStatus {
    /// `Connected` and `Lost`; `CertificateAccepted` and
    /// `CertificateExpiring` once an agent presented a certificate.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The version the agent reported in its last Hello.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_version: Option<String>,
    /// When the manager last heard from the agent (written at most once per
    /// status interval, so many clusters do not flood the API server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat_time: Option<Time>,
    /// Mirrors the agent holds.
    #[serde(default)]
    pub active_mirrors: u32,
    /// The room the agent last reported, by node pool: what placement
    /// weighs (less what Jobs placed there and not started yet take).
    /// Absent while the agent reports none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<Vec<PoolStatus>>,
    /// Where the agent reads the worker's own Kueue (`--room-kueue`): its
    /// ClusterQueues and the quota each has free, as placement weighs them
    /// for Jobs queued there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<QueueStatus>,
}

/// A ClusterQueue of the worker's own Kueue, as the WorkerCluster status
/// shows it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    pub name: String,
    /// The LocalQueues that feed it, as `namespace/name`.
    #[serde(default)]
    pub local_queues: Vec<String>,
    /// Of each resource it covers, the most one flavor has free, as
    /// quantities.
    #[serde(default)]
    pub free: BTreeMap<String, String>,
}

impl From<&jobrelay_kinds::room::Queue> for QueueStatus {
    fn from(queue: &jobrelay_kinds::room::Queue) -> QueueStatus {
        QueueStatus {
            name: queue.name.clone(),
            local_queues: queue.local_queues.clone(),
            free: quantities(&queue.free),
        }
    }
}

/// One node pool's room, as the WorkerCluster status shows it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    /// The labels its nodes share (all but `kubernetes.io/hostname`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Its NoSchedule and NoExecute taints, as `key=value:effect`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<String>,
    /// Schedulable, Ready nodes.
    pub nodes: u32,
    /// Allocatable less what bound, non-terminal Pods request, summed over
    /// its nodes, as quantities.
    #[serde(default)]
    pub free: BTreeMap<String, String>,
    /// The most of each resource free on any one of its nodes.
    #[serde(default)]
    pub largest: BTreeMap<String, String>,
}

/// Amounts as quantities: `cpu` in cores or millicores, the rest whole.
fn quantities(amounts: &jobrelay_kinds::room::Resources) -> BTreeMap<String, String> {
    amounts
        .0
        .iter()
        .map(|(resource, amount)| {
            let quantity = match resource.as_str() {
                "cpu" if amount % 1000 == 0 => (amount / 1000).to_string(),
                "cpu" => format!("{amount}m"),
                _ => amount.to_string(),
            };
            (resource.clone(), quantity)
        })
        .collect()
}

impl From<&jobrelay_kinds::room::Pool> for PoolStatus {
    fn from(pool: &jobrelay_kinds::room::Pool) -> PoolStatus {
        PoolStatus {
            labels: pool.labels.clone(),
            taints: pool
                .taints
                .iter()
                .map(|t| format!("{}={}:{}", t.key, t.value, t.effect))
                .collect(),
            nodes: pool.nodes,
            free: quantities(&pool.free),
            largest: quantities(&pool.largest),
        }
    }
}

/// A condition that keeps its transition time while its status holds.
pub fn condition(
    current: &WorkerClusterStatus,
    kind: &str,
    status: bool,
    reason: &str,
    message: String,
    changed_at: Timestamp,
    generation: Option<i64>,
) -> Condition {
    let status = if status { "True" } else { "False" };
    let last_transition_time = current
        .conditions
        .iter()
        .find(|c| c.type_ == kind && c.status == status)
        .map_or(Time(changed_at), |c| c.last_transition_time.clone());
    Condition {
        type_: kind.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time,
        observed_generation: generation,
    }
}
