//! Pods of mirrors stuck Terminating on a node that stopped answering. A
//! Pod being deleted is removed by its node's kubelet; on a node that is
//! NotReady or unreachable nothing removes it, so a mirror being deleted —
//! or suspended by Kueue on the manager — keeps its Pods, its Job waits
//! for them, and the manager's quota stays held for ever.
//!
//! Each such Pod is reported with its mirror's status (the manager says on
//! the Job which Pods on which node hold it). Where the cluster's
//! WorkerCluster opts in (`spec.terminatingPodTimeout`, which the Welcome
//! carries), the agent force-deletes (grace period 0) one whose node has
//! not been Ready for that long. Kubernetes' own way is the
//! `node.kubernetes.io/out-of-service` taint an operator puts on a node
//! known to be down; this is the automatic one, for fleets that accept that
//! on a node only cut off (not down) the Pod's containers may run on until
//! its kubelet is back.
//!
//! The agent caches only its Pods' metadata, so the node of a Pod whose
//! deletion is overdue is read when it is looked at: a sweep every
//! [`UNSET_EVERY`], or every quarter of the timeout (between 1 and 30
//! seconds) while it is set.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jobrelay_proto::v1::StuckPod;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::reflector::Store;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::deletion_pace::DeletionPace;
use crate::report::lasted;
use crate::watched::{Changes, Touched, origin_uid};

/// Pods looked at in one sweep, at most: the rest wait for the next.
const PER_SWEEP: usize = 64;
/// How often the Pods are looked at while no timeout is set.
pub const UNSET_EVERY: Duration = Duration::from_secs(10);

/// A Pod held Terminating on a node that is not Ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub pod: String,
    pub node: String,
    pub down_since: Timestamp,
}

impl Held {
    /// The report, the node's downtime measured at `now` on this worker.
    pub fn report(&self, now: Timestamp) -> StuckPod {
        StuckPod {
            pod: self.pod.clone(),
            node: self.node.clone(),
            node_down_for: lasted(self.down_since, now),
        }
    }
}

/// The held Pods of each mirror, by origin UID, as the last sweep found
/// them (sorted by name).
pub type HeldPods = HashMap<String, Vec<Held>>;
/// A node as the decision reads it: since when its Ready condition has not
/// been True.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// NotReady (False) or unreachable (Unknown) since then.
    DownSince(Timestamp),
    /// No such node, or no Ready condition yet: the Pod garbage collector's,
    /// or nobody's, to judge.
    Unknown,
}

/// Reads the node's Ready condition.
pub fn readiness(node: &Node) -> Readiness {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    match ready {
        None => Readiness::Unknown,
        Some(c) if c.status == "True" => Readiness::Ready,
        Some(c) => match &c.last_transition_time {
            Some(at) => Readiness::DownSince(at.0),
            None => Readiness::Unknown,
        },
    }
}

/// What becomes of a Pod Terminating since `due`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Its grace is not over, or its node is Ready (or unknown).
    NotStuck,
    /// Held on a node down since then: reported.
    Held(Timestamp),
    /// Held for longer than the timeout: force-deleted.
    Force,
}

/// What becomes at `now` of a Pod whose deletion was due at `due` (its
/// deletionTimestamp: the request plus its grace period), on a node of
/// `node` readiness: held once its grace is over on a node not Ready,
/// forced once that node has not been Ready for `timeout` (when set).
pub fn judge(
    due: Timestamp,
    node: Readiness,
    now: Timestamp,
    timeout: Option<Duration>,
) -> Verdict {
    let Readiness::DownSince(since) = node else {
        return Verdict::NotStuck;
    };
    if now < due {
        return Verdict::NotStuck;
    }
    let down_for = Duration::try_from(now.duration_since(since)).unwrap_or_default();
    match timeout {
        Some(timeout) if down_for >= timeout => Verdict::Force,
        _ => Verdict::Held(since),
    }
}

/// The origin UIDs whose held Pods differ between `was` and `now`.
pub fn changed(was: &HeldPods, now: &HeldPods) -> Vec<String> {
    let mut uids: Vec<String> = was
        .keys()
        .chain(now.keys())
        .filter(|uid| was.get(*uid) != now.get(*uid))
        .cloned()
        .collect();
    uids.sort_unstable();
    uids.dedup();
    uids
}

/// The Pods (as cached: metadata only) whose deletion was due by `now`,
/// the longest overdue first; only these can be stuck.
pub fn overdue(pods: &[Arc<Pod>], now: Timestamp) -> Vec<Arc<Pod>> {
    let mut overdue: Vec<(Timestamp, Arc<Pod>)> = pods
        .iter()
        .filter_map(|pod| {
            let due = pod.metadata.deletion_timestamp.as_ref()?.0;
            (due <= now).then(|| (due, Arc::clone(pod)))
        })
        .collect();
    overdue.sort_by_key(|(due, _)| *due);
    overdue.into_iter().map(|(_, pod)| pod).collect()
}

/// How often the Pods are looked at under `timeout`.
pub fn sweep_every(timeout: Option<Duration>) -> Duration {
    match timeout {
        Some(timeout) => (timeout / 4).clamp(Duration::from_secs(1), Duration::from_secs(30)),
        None => UNSET_EVERY,
    }
}

/// Where the sweep looks and what it tells.
pub struct Sweep {
    pub client: kube::Client,
    /// This origin's Pods: the agent's metadata cache.
    pub pods: Store<Pod>,
    /// The WorkerCluster's `terminatingPodTimeout`, as the Welcome says it.
    pub timeout: watch::Receiver<Option<Duration>>,
    pub deletions: DeletionPace,
    /// Where the held Pods are published; the mirrors whose held Pods
    /// changed are marked for the agent's next pass.
    pub held: watch::Sender<Arc<HeldPods>>,
    pub changes: Arc<Changes>,
}

impl Sweep {
    /// Sweeps until the timeout's sender is gone.
    pub async fn run(mut self) {
        loop {
            let timeout = *self.timeout.borrow_and_update();
            let held = self.sweep(timeout).await;
            let mut changed = Vec::new();
            self.held.send_if_modified(|published| {
                changed = self::changed(published, &held);
                *published = Arc::new(held);
                !changed.is_empty()
            });
            self.changes.mark(Touched::Origins(changed));
            tokio::select! {
                () = tokio::time::sleep(sweep_every(timeout)) => {}
                told = self.timeout.changed() => if told.is_err() { return },
            }
        }
    }

    /// One look at the overdue Pods: each one's node read once, each Pod
    /// due force-deleted; returns those held.
    async fn sweep(&self, timeout: Option<Duration>) -> HeldPods {
        let now = Timestamp::now();
        let nodes: Api<Node> = Api::all(self.client.clone());
        let mut seen: HashMap<String, Readiness> = HashMap::new();
        let mut held = HeldPods::new();
        for cached in overdue(&self.pods.state(), now).into_iter().take(PER_SWEEP) {
            let Some(uid) = origin_uid(&cached.metadata) else {
                continue;
            };
            let Some((api, pod)) = read_pod(&self.client, &cached).await else {
                continue;
            };
            let (Some(node), Some(due)) = (
                pod.spec.as_ref().and_then(|s| s.node_name.clone()),
                pod.metadata.deletion_timestamp.as_ref().map(|t| t.0),
            ) else {
                continue;
            };
            let readiness = match seen.get(&node) {
                Some(readiness) => *readiness,
                None => *seen
                    .entry(node.clone())
                    .or_insert(read_node(&nodes, &node).await),
            };
            let down_since = match (judge(due, readiness, now, timeout), readiness) {
                (Verdict::NotStuck, _) => continue,
                (Verdict::Held(since), _) => since,
                (Verdict::Force, _)
                    if self.deletions.try_take_n(1) && force(&api, &pod, &node).await =>
                {
                    continue;
                }
                (Verdict::Force, Readiness::DownSince(since)) => since,
                (Verdict::Force, _) => continue,
            };
            held.entry(uid).or_default().push(Held {
                pod: pod.name_any(),
                node,
                down_since,
            });
        }
        for pods in held.values_mut() {
            pods.sort_by(|a, b| a.pod.cmp(&b.pod));
        }
        held
    }
}

/// The Pod `cached` shows, read whole (the cache holds its metadata only);
/// `None` if it is gone, replaced, or cannot be read.
async fn read_pod(client: &kube::Client, cached: &Pod) -> Option<(Api<Pod>, Pod)> {
    let namespace = cached.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    match api.get_opt(&cached.name_any()).await {
        Ok(Some(pod)) if pod.metadata.uid == cached.metadata.uid => Some((api, pod)),
        Ok(_) => None,
        Err(error) => {
            warn!(%namespace, pod = %cached.name_any(), %error, "reading a Terminating Pod failed");
            None
        }
    }
}

/// The readiness of node `name`; unknown if it cannot be read.
async fn read_node(nodes: &Api<Node>, name: &str) -> Readiness {
    match nodes.get_opt(name).await {
        Ok(found) => found.as_ref().map_or(Readiness::Unknown, readiness),
        Err(error) => {
            warn!(node = %name, %error, "reading the node of a Terminating Pod failed");
            Readiness::Unknown
        }
    }
}

/// Deletes `pod` with grace period 0 and a UID precondition; says
/// whether it went.
async fn force(api: &Api<Pod>, pod: &Pod, node: &str) -> bool {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    let name = pod.name_any();
    match api.delete(&name, &params).await {
        Ok(_) => {
            info!(pod = %name, %node, "force-deleted a Pod stuck Terminating on a node that is not Ready (terminatingPodTimeout)");
            true
        }
        Err(error) => {
            warn!(pod = %name, %node, %error, "force-deleting a stuck Pod failed; trying again next sweep");
            false
        }
    }
}

#[cfg(test)]
#[path = "stuck_pods_tests.rs"]
mod tests;
