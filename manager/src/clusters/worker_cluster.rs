//! The `WorkerCluster` custom resource: one per worker cluster allowed to
//! connect. Its name is the agent's identity (the SAN of its client
//! certificate); its spec says which manager namespaces may run there and how
//! long a disconnected cluster is waited for; its status is what the manager
//! knows of the link.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use kube::core::{Selector, SelectorExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use status::{PoolStatus, QueueStatus, WorkerClusterStatus, condition};

use crate::clusters::certificate_pin::CertificatePin;
use crate::clusters::fencing::Fencing;

/// How long a cluster may stay disconnected before it is Lost, unless its
/// `spec.lostAfter` says otherwise.
pub const DEFAULT_LOST_AFTER: Duration = crate::clusters::fencing::DEFAULT.lost_after;

/// How long a mirror waits on a cluster before it moves: its Pods all
/// unschedulable (`spec.unschedulableTimeout`), or refused by the worker
/// for a reason that can clear (`spec.refusedRetryTimeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveTimeout {
    Unschedulable,
    Refused,
}

impl MoveTimeout {
    /// Both default to two minutes.
    pub const DEFAULT: Duration = Duration::from_secs(2 * 60);

    /// The field of the spec.
    pub fn field(self) -> &'static str {
        match self {
            MoveTimeout::Unschedulable => "unschedulableTimeout",
            MoveTimeout::Refused => "refusedRetryTimeout",
        }
    }
}

/// Condition type: the agent holds a session with the manager now.
pub const CONNECTED: &str = "Connected";
/// Condition type: the cluster has been disconnected for `lostAfter`.
pub const LOST: &str = "Lost";

/// A worker cluster whose agent may connect to this manager.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "jobrelay.dev",
    version = "v1alpha1",
    kind = "WorkerCluster",
    shortname = "wc",
    status = "WorkerClusterStatus",
    printcolumn = r#"{"name":"Connected","type":"string","jsonPath":".status.conditions[?(@.type==\"Connected\")].status"}"#,
    printcolumn = r#"{"name":"Mirrors","type":"integer","jsonPath":".status.activeMirrors"}"#,
    printcolumn = r#"{"name":"Last-Heartbeat","type":"date","jsonPath":".status.lastHeartbeatTime"}"#,
    printcolumn = r#"{"name":"Agent-Version","type":"string","priority":1,"jsonPath":".status.agentVersion"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = fencing_rules)]
pub struct WorkerClusterSpec {
    /// Which namespaces of the manager cluster may run Jobs here; empty or
    /// absent means every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// How long the cluster may be disconnected before it is Lost (a Go-style
    /// duration such as `15m`; default 15m). A Lost cluster gets no new Jobs,
    /// and manager Jobs being deleted whose mirrors sit there are released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "duration_schema")]
    pub lost_after: Option<String>,
    /// How long the agent may hear no manager before it suspends every
    /// mirror it holds and waits for their Pods to be gone (a Go-style
    /// duration; default: `lostAfter` less 2/15 of it, at least 10s less).
    /// At least 10s, and at least 10s shorter than `lostAfter`, so a Job
    /// placed elsewhere after the cluster is Lost never runs beside its old
    /// copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "duration_schema")]
    pub fence_after: Option<String>,
    /// How long every Pod of a mirror may wait here with no node found
    /// (Pending, unschedulable) before the mirror is withdrawn, Pods first,
    /// and its Job placed on another cluster, this one tried last (a
    /// Go-style duration; default 2m). Only while no Pod of it ever ran,
    /// unless the Job's `jobrelay.dev/move-when-unschedulable` annotation
    /// is `always`; never for a Job pinned to the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "duration_schema")]
    pub unschedulable_timeout: Option<String>,
    /// How long the worker may refuse a mirror for a reason that can clear
    /// (its namespace missing, a ResourceQuota exceeded, a webhook's
    /// denial) while its agent tries again, before the mirror is withdrawn
    /// and its Job placed on another cluster, this one tried last (a
    /// Go-style duration; default 2m). Never for a Job pinned to the
    /// cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "duration_schema")]
    pub refused_retry_timeout: Option<String>,
    /// Opt-in: how long a Pod of a mirror may stay Terminating, its grace
    /// period over, on a node whose Ready condition has not been True for
    /// as long, before the agent force-deletes it (a Go-style duration;
    /// absent or `0`: never). Without it a Pod on a node that stopped answering
    /// stays Terminating until the node is back, and its Job — deleted, or
    /// suspended by Kueue, whose quota it holds — waits as long. A Pod
    /// forced off a node that is only cut off may run on there until its
    /// kubelet is back; Kubernetes' own way, for a node known down, is the
    /// `node.kubernetes.io/out-of-service` taint. The agent reads the node
    /// (the chart's room role grants `nodes: get`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "duration_schema")]
    pub terminating_pod_timeout: Option<String>,
    /// Opt-in: this cluster runs its own Kueue, and a queued Job's mirror is
    /// queued there too (see [`WorkerKueue`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kueue: Option<WorkerKueue>,
    /// Which of the client CA's certificates naming this cluster its agent
    /// may use, pinned by public key, by issuer, or both. A session whose
    /// certificate stops matching ends; the agent dials again and is judged
    /// afresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<CertificatePin>,
}

/// How a worker cluster's own Kueue takes queued Jobs: the mirror of a Job
/// that carries `kueue.x-k8s.io/queue-name` keeps that label (its value
/// mapped by `localQueues`), so the worker's Kueue admits it against the
/// worker's own quota and owns its `suspend`. Behind a manager-side Kueue,
/// jobrelay's admission check is `Ready` only once the worker's Kueue
/// admitted the mirror.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerKueue {
    /// The worker's LocalQueue for a manager LocalQueue, by name; a queue not
    /// listed keeps its name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub local_queues: BTreeMap<String, String>,
    /// How long the worker's Kueue may take to admit a mirror (a Go-style
    /// duration; default 5m). Past it the mirror is removed, Pods first, and
    /// the Workload sent back to its queue (`Retry`), preferring another
    /// cluster next time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "duration_schema")]
    pub admit_within: Option<String>,
}

/// The schema of a duration field: the grammar both binaries parse
/// ([`jobrelay_proto::duration`]), so the API server refuses what the manager
/// would refuse, instead of the manager falling back to a default.
fn duration_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    use jobrelay_proto::duration::{LONGEST_HOURS, PATTERN};
    schemars::json_schema!({
        "type": "string",
        "nullable": true,
        "maxLength": 64,
        "pattern": PATTERN,
        "x-kubernetes-validations": [{
            "rule": format!("duration(self) <= duration('{LONGEST_HOURS}h')"),
            "message": format!("must be at most {LONGEST_HOURS}h (366 days)"),
        }],
    })
}

/// Adds the rules that check `fenceAfter` against `lostAfter` to the spec's
/// schema.
fn fencing_rules(schema: &mut schemars::Schema) {
    schema.insert(
        "x-kubernetes-validations".into(),
        crate::clusters::fencing::rules(DEFAULT_LOST_AFTER),
    );
}

/// A worker's Kueue settings, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerQueue {
    pub local_queues: BTreeMap<String, String>,
    pub admit_within: Duration,
}

/// How long a worker's Kueue may take to admit a mirror, unless
/// `spec.kueue.admitWithin` says otherwise.
pub const DEFAULT_ADMIT_WITHIN: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("WorkerCluster {cluster}: spec.lostAfter: {source}")]
    LostAfter {
        cluster: String,
        source: jobrelay_proto::duration::DurationError,
    },
    #[error("WorkerCluster {cluster}: spec.fenceAfter: {source}")]
    FenceAfter {
        cluster: String,
        source: jobrelay_proto::duration::DurationError,
    },
    #[error("WorkerCluster {cluster}: spec.{field}: {refused}")]
    Fencing {
        cluster: String,
        field: &'static str,
        refused: crate::clusters::fencing::Refused,
    },
    #[error("WorkerCluster {cluster}: spec.{field}: {source}")]
    Duration {
        cluster: String,
        field: &'static str,
        source: jobrelay_proto::duration::DurationError,
    },
    #[error("WorkerCluster {cluster}: spec.kueue.admitWithin: {source}")]
    AdmitWithin {
        cluster: String,
        source: jobrelay_proto::duration::DurationError,
    },
    #[error("WorkerCluster {cluster}: spec.namespaceSelector: {message}")]
    NamespaceSelector { cluster: String, message: String },
}

impl WorkerCluster {
    /// `spec.lostAfter`, or the default when it is absent.
    pub fn lost_after(&self) -> Result<Duration, SpecError> {
        match &self.spec.lost_after {
            None => Ok(DEFAULT_LOST_AFTER),
            Some(text) => {
                jobrelay_proto::duration::parse(text).map_err(|source| SpecError::LostAfter {
                    cluster: kube::ResourceExt::name_any(self),
                    source,
                })
            }
        }
    }

    /// `spec.unschedulableTimeout` or `spec.refusedRetryTimeout`, or the
    /// default when it is absent.
    pub fn move_timeout(&self, which: MoveTimeout) -> Result<Duration, SpecError> {
        let text = match which {
            MoveTimeout::Unschedulable => &self.spec.unschedulable_timeout,
            MoveTimeout::Refused => &self.spec.refused_retry_timeout,
        };
        let Some(text) = text else {
            return Ok(MoveTimeout::DEFAULT);
        };
        jobrelay_proto::duration::parse(text).map_err(|source| SpecError::Duration {
            cluster: kube::ResourceExt::name_any(self),
            field: which.field(),
            source,
        })
    }

    /// `spec.terminatingPodTimeout`: `None` when the agent never forces
    /// a stuck Pod.
    pub fn terminating_pod_timeout(&self) -> Result<Option<Duration>, SpecError> {
        let Some(text) = &self.spec.terminating_pod_timeout else {
            return Ok(None);
        };
        jobrelay_proto::duration::parse(text)
            .map(|timeout| Some(timeout).filter(|t| !t.is_zero()))
            .map_err(|source| SpecError::Duration {
                cluster: kube::ResourceExt::name_any(self),
                field: "terminatingPodTimeout",
                source,
            })
    }

    /// When the agent fences and when the cluster is Lost: `spec.fenceAfter`
    /// (or its default) checked against `spec.lostAfter`.
    pub fn fencing(&self) -> Result<Fencing, SpecError> {
        use crate::clusters::fencing::{Refused, fencing};
        let lost_after = self.lost_after()?;
        let fence_after = match &self.spec.fence_after {
            None => None,
            Some(text) => Some(jobrelay_proto::duration::parse(text).map_err(|source| {
                SpecError::FenceAfter {
                    cluster: kube::ResourceExt::name_any(self),
                    source,
                }
            })?),
        };
        fencing(lost_after, fence_after).map_err(|refused| SpecError::Fencing {
            cluster: kube::ResourceExt::name_any(self),
            field: match refused {
                Refused::LostAfter { .. } => "lostAfter",
                Refused::FenceAfter { .. } => "fenceAfter",
            },
            refused,
        })
    }

    /// `spec.kueue`, validated: `None` when the cluster runs no Kueue of its
    /// own for jobrelay.
    pub fn worker_queue(&self) -> Result<Option<WorkerQueue>, SpecError> {
        let Some(kueue) = &self.spec.kueue else {
            return Ok(None);
        };
        let admit_within = match &kueue.admit_within {
            None => DEFAULT_ADMIT_WITHIN,
            Some(text) => {
                jobrelay_proto::duration::parse(text).map_err(|source| SpecError::AdmitWithin {
                    cluster: kube::ResourceExt::name_any(self),
                    source,
                })?
            }
        };
        Ok(Some(WorkerQueue {
            local_queues: kueue.local_queues.clone(),
            admit_within,
        }))
    }

    /// Does `spec.namespaceSelector` admit a namespace with these labels?
    pub fn admits(
        &self,
        namespace_labels: &std::collections::BTreeMap<String, String>,
    ) -> Result<bool, SpecError> {
        let Some(selector) = &self.spec.namespace_selector else {
            return Ok(true);
        };
        let selector =
            Selector::try_from(selector.clone()).map_err(|e| SpecError::NamespaceSelector {
                cluster: kube::ResourceExt::name_any(self),
                message: e.to_string(),
            })?;
        Ok(selector.matches(namespace_labels))
    }

    /// The status of condition `kind`, if set.
    pub fn condition(&self, kind: &str) -> Option<&Condition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == kind)
    }
}

#[path = "worker_cluster_status.rs"]
mod status;

#[cfg(test)]
#[path = "worker_cluster_tests.rs"]
mod tests;
