//! Pods of mirrors stuck Terminating on a node that stopped answering. A
//! Pod being deleted is removed by its node's kubelet; on a node that is
//! NotReady or unreachable nothing removes it, so a mirror being deleted —
//! or suspended by Kueue on the manager — keeps its Pods, its Job waits
//! for them, and the manager's quota stays held for ever.
//!
//! Where the cluster's WorkerCluster opts in (`spec.terminatingPodTimeout`,
//! which the Welcome carries), the agent force-deletes (grace period 0) a
//! Pod of its origin whose deletion is due and whose node has not been
//! Ready for that long. Kubernetes' own way is the
//! `node.kubernetes.io/out-of-service` taint an operator puts on a node
//! known to be down; this is the automatic one, for fleets that accept that
//! on a node only cut off (not down) the Pod's containers may run on until
//! its kubelet is back.
//!
//! The agent caches only its Pods' metadata, so the node of a Pod whose
//! deletion is overdue is read when it is looked at: a sweep every quarter
//! of the timeout (between 1 and 30 seconds), while it is set.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::reflector::Store;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::deletion_pace::DeletionPace;

/// Pods looked at in one sweep, at most: the rest wait for the next.
const PER_SWEEP: usize = 64;

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

/// Whether a Pod whose deletion was due at `due` (its deletionTimestamp:
/// the request plus its grace period), on a node of `node` readiness, is
/// forced at `now`: its grace is over and its node has not been Ready for
/// `timeout`.
pub fn force_due(due: Timestamp, node: Readiness, now: Timestamp, timeout: Duration) -> bool {
    let Readiness::DownSince(since) = node else {
        return false;
    };
    let down_for = Duration::try_from(now.duration_since(since)).unwrap_or_default();
    now >= due && down_for >= timeout
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
pub fn sweep_every(timeout: Duration) -> Duration {
    (timeout / 4).clamp(Duration::from_secs(1), Duration::from_secs(30))
}

/// Sweeps this origin's Pods (`pods`, the agent's metadata cache) while
/// `timeout` is set, until `timeout`'s sender is gone; deletions draw on
/// the agent's deletion pace.
pub async fn run(
    client: kube::Client,
    pods: Store<Pod>,
    mut timeout: watch::Receiver<Option<Duration>>,
    deletions: DeletionPace,
) {
    loop {
        let Some(set) = *timeout.borrow_and_update() else {
            if timeout.changed().await.is_err() {
                return;
            }
            continue;
        };
        sweep(&client, &pods.state(), set, &deletions).await;
        tokio::select! {
            () = tokio::time::sleep(sweep_every(set)) => {}
            changed = timeout.changed() => if changed.is_err() { return },
        }
    }
}

/// One look at the overdue Pods: each one's node read once, each Pod due
/// force-deleted.
async fn sweep(client: &kube::Client, pods: &[Arc<Pod>], timeout: Duration, pace: &DeletionPace) {
    let now = Timestamp::now();
    let nodes: Api<Node> = Api::all(client.clone());
    let mut seen: HashMap<String, Readiness> = HashMap::new();
    for cached in overdue(pods, now).into_iter().take(PER_SWEEP) {
        let namespace = cached.namespace().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let pod = match api.get_opt(&cached.name_any()).await {
            Ok(Some(pod)) if pod.metadata.uid == cached.metadata.uid => pod,
            Ok(_) => continue,
            Err(error) => {
                warn!(%namespace, pod = %cached.name_any(), %error, "reading a Terminating Pod failed");
                continue;
            }
        };
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        let readiness = match seen.get(&node) {
            Some(readiness) => *readiness,
            None => {
                let readiness = match nodes.get_opt(&node).await {
                    Ok(found) => found.as_ref().map_or(Readiness::Unknown, readiness),
                    Err(error) => {
                        warn!(%node, %error, "reading the node of a Terminating Pod failed");
                        Readiness::Unknown
                    }
                };
                *seen.entry(node.clone()).or_insert(readiness)
            }
        };
        let Some(due) = pod.metadata.deletion_timestamp.as_ref().map(|t| t.0) else {
            continue;
        };
        if force_due(due, readiness, now, timeout) && pace.try_take_n(1) {
            force(&api, &pod, &node, readiness).await;
        }
    }
}

/// Deletes `pod` with grace period 0 and a UID precondition.
async fn force(api: &Api<Pod>, pod: &Pod, node: &str, readiness: Readiness) {
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
            info!(pod = %name, %node, ?readiness, "force-deleted a Pod stuck Terminating on a node that is not Ready (terminatingPodTimeout)");
        }
        Err(error) => {
            warn!(pod = %name, %node, %error, "force-deleting a stuck Pod failed; trying again next sweep")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TIMEOUT: Duration = Duration::from_secs(60);

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn node(ready: &str, since: Option<Timestamp>) -> Node {
        let mut condition = json!({"type": "Ready", "status": ready});
        if let Some(since) = since {
            condition["lastTransitionTime"] = json!(since.to_string());
        }
        serde_json::from_value(json!({"status": {"conditions": [
            {"type": "MemoryPressure", "status": "False"}, condition,
        ]}}))
        .unwrap()
    }

    fn pod(name: &str, deletion: Option<Timestamp>) -> Arc<Pod> {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.into());
        pod.metadata.deletion_timestamp =
            deletion.map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time);
        Arc::new(pod)
    }

    #[test]
    fn a_node_is_down_since_its_ready_condition_left_true() {
        assert_eq!(readiness(&node("True", Some(at(0)))), Readiness::Ready);
        assert_eq!(
            readiness(&node("False", Some(at(5)))),
            Readiness::DownSince(at(5))
        );
        assert_eq!(
            readiness(&node("Unknown", Some(at(7)))),
            Readiness::DownSince(at(7)),
            "unreachable"
        );
        assert_eq!(readiness(&Node::default()), Readiness::Unknown);
    }

    #[test]
    fn a_pod_is_forced_once_its_grace_is_over_and_its_node_down_for_the_timeout() {
        let down = Readiness::DownSince(at(0));
        assert!(!force_due(at(10), down, at(59), TIMEOUT), "down 59s");
        assert!(force_due(at(10), down, at(60), TIMEOUT));
        assert!(
            !force_due(at(90), down, at(80), TIMEOUT),
            "its grace period is not over"
        );
        assert!(force_due(at(90), down, at(90), TIMEOUT));
    }

    #[test]
    fn a_pod_on_a_ready_or_unknown_node_is_never_forced() {
        for node in [Readiness::Ready, Readiness::Unknown] {
            assert!(!force_due(at(0), node, at(3600), TIMEOUT), "{node:?}");
        }
    }

    #[test]
    fn only_pods_whose_deletion_is_due_are_overdue_the_longest_first() {
        let pods = [
            pod("live", None),
            pod("later", Some(at(30))),
            pod("recent", Some(at(20))),
            pod("oldest", Some(at(10))),
        ];
        let names: Vec<String> = overdue(&pods, at(25))
            .iter()
            .map(|p| p.name_any())
            .collect();
        assert_eq!(names, ["oldest", "recent"]);
    }

    #[test]
    fn the_sweep_runs_four_times_per_timeout_within_bounds() {
        assert_eq!(sweep_every(TIMEOUT), Duration::from_secs(15));
        assert_eq!(sweep_every(Duration::from_secs(2)), Duration::from_secs(1));
        assert_eq!(
            sweep_every(Duration::from_secs(3600)),
            Duration::from_secs(30)
        );
    }
}
