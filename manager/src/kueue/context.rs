//! What the admission check's controllers work with: the client, the caches
//! of AdmissionChecks, flavors, WorkerClusterSets, queues and Jobs, the fleet, the
//! reservations, and the Job controller's triggers; and their error.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::reflector::Store;
use tokio::sync::mpsc;

use super::Reservations;
use super::answers::Answers;
use super::types::{AdmissionCheck, ClusterQueue, LocalQueue, ResourceFlavor};
use crate::clusters::registry::Registry;
use crate::clusters::worker_cluster_set::WorkerClusterSet;
use crate::fleet::Fleet;
use crate::kinds::Key;
use crate::kinds::stores::Stores;
use crate::telemetry::events::Events;

pub struct Context {
    pub client: kube::Client,
    pub checks: Store<AdmissionCheck>,
    pub flavors: Store<ResourceFlavor>,
    pub sets: Store<WorkerClusterSet>,
    /// The queues that may list the checks: which namespaces their Jobs
    /// come from, and whether a check is listed for some flavors only.
    pub cluster_queues: Store<ClusterQueue>,
    pub local_queues: Store<LocalQueue>,
    /// The relayed objects Workloads may belong to.
    pub stores: Stores,
    pub registry: Registry,
    pub fleet: Arc<Fleet>,
    pub reservations: Arc<Reservations>,
    /// The check states written that the Workload cache may not show yet.
    pub answers: Answers,
    /// Wakes the Job controller for a Job.
    pub triggers: mpsc::UnboundedSender<Key>,
    /// A rejection shows on the Job too.
    pub events: Events,
    /// How long placement avoids a cluster where a Job's Pods did not
    /// become ready (`kueue.avoidAfterPodsNotReady`).
    pub avoid_after_pods_not_ready: Duration,
}

/// Why a reconcile of the check's controllers failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
}
