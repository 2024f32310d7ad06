//! The registered worker clusters and the namespaces of the manager cluster,
//! as cached from the API server: who may connect, and where a Job may go.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::clusters::worker_cluster::{
    DEFAULT_ADMIT_WITHIN, MoveTimeout, WorkerCluster, WorkerQueue,
};

/// Why a cluster cannot take a Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterRefusal {
    Unregistered,
    NamespaceNotAdmitted,
    Lost,
}

#[derive(Clone)]
pub struct Registry {
    pub clusters: Store<WorkerCluster>,
    pub namespaces: Store<Namespace>,
}

impl Registry {
    pub fn get(&self, cluster: &str) -> Option<std::sync::Arc<WorkerCluster>> {
        self.clusters.get(&ObjectRef::new(cluster))
    }

    /// Whether the cache holds namespace `namespace`: until it does, what
    /// its labels admit is not known.
    pub fn knows_namespace(&self, namespace: &str) -> bool {
        self.namespaces.get(&ObjectRef::new(namespace)).is_some()
    }

    /// The labels of a namespace of the manager cluster.
    pub fn namespace_labels(&self, namespace: &str) -> BTreeMap<String, String> {
        self.namespaces
            .get(&ObjectRef::new(namespace))
            .and_then(|ns| ns.metadata.labels.clone())
            .unwrap_or_default()
    }

    /// How long a mirror waits on `cluster` before it moves: its Pods all
    /// unschedulable, or refused (`spec.unschedulableTimeout`,
    /// `spec.refusedRetryTimeout`); an invalid value is logged and the
    /// default used.
    pub fn move_timeout(&self, cluster: &str, which: MoveTimeout) -> Duration {
        let Some(registered) = self.get(cluster) else {
            return MoveTimeout::DEFAULT;
        };
        registered.move_timeout(which).unwrap_or_else(|error| {
            tracing::warn!(%error, "invalid WorkerCluster; using the default");
            MoveTimeout::DEFAULT
        })
    }

    /// How `cluster`'s own Kueue takes queued Jobs, if it runs one for
    /// jobrelay (`spec.kueue`); an invalid `admitWithin` is logged and the
    /// default used.
    pub fn worker_queue(&self, cluster: &str) -> Option<WorkerQueue> {
        let registered = self.get(cluster)?;
        match registered.worker_queue() {
            Ok(queue) => queue,
            Err(error) => {
                tracing::warn!(%error, "invalid WorkerCluster; using the default");
                let kueue = registered.spec.kueue.as_ref()?;
                Some(WorkerQueue {
                    local_queues: kueue.local_queues.clone(),
                    admit_within: DEFAULT_ADMIT_WITHIN,
                })
            }
        }
    }

    /// May `cluster` run Jobs of `namespace` (lost or not)?
    pub fn admits(&self, cluster: &str, namespace: &str) -> Result<(), ClusterRefusal> {
        let registered = self.get(cluster).ok_or(ClusterRefusal::Unregistered)?;
        match registered.admits(&self.namespace_labels(namespace)) {
            Ok(true) => Ok(()),
            Ok(false) => Err(ClusterRefusal::NamespaceNotAdmitted),
            Err(error) => {
                tracing::warn!(%error, "invalid WorkerCluster");
                Err(ClusterRefusal::NamespaceNotAdmitted)
            }
        }
    }
}

impl ClusterRefusal {
    /// Why, in words, for an Event on the Job.
    pub fn explain(&self, cluster: &str, namespace: &str) -> String {
        match self {
            ClusterRefusal::Unregistered => format!(
                "label jobrelay.dev/cluster names cluster {cluster}, which has no WorkerCluster"
            ),
            ClusterRefusal::NamespaceNotAdmitted => format!(
                "label jobrelay.dev/cluster names cluster {cluster}, whose spec.namespaceSelector does not admit namespace {namespace}"
            ),
            ClusterRefusal::Lost => format!(
                "label jobrelay.dev/cluster names cluster {cluster}, which is Lost; the Job is deactivated"
            ),
        }
    }
}
