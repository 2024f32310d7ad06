//! What a Job's user is told when Pods of its mirror are held Terminating
//! on a node that is not Ready (the agent's PodsHeld report): which Pods,
//! on which nodes, since when, what holds them there and what lets them go.
//! Pure; the session publishes it as a `PodsStuckTerminating` warning on
//! the Job.

use std::time::Duration;

/// Pods named in full; more are counted.
const NAMED: usize = 5;

/// A Pod held Terminating, as the agent reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldPod {
    pub pod: String,
    pub node: String,
    /// How long its node has not been Ready.
    pub node_down_for: Duration,
}

/// The Event's note for `pods` held on `cluster`, whose
/// `terminatingPodTimeout` is `timeout`; `None` when none is held.
pub fn note(cluster: &str, pods: &[HeldPod], timeout: Option<Duration>) -> Option<String> {
    let (first, rest) = pods.split_at(pods.len().min(NAMED));
    if first.is_empty() {
        return None;
    }
    let mut named: Vec<String> = first
        .iter()
        .map(|p| {
            let down = p.node_down_for.as_secs();
            format!("{} on node {} (not Ready for {down}s)", p.pod, p.node)
        })
        .collect();
    if !rest.is_empty() {
        named.push(format!("{} more", rest.len()));
    }
    let (count, are, they, hold, them) = match pods.len() {
        1 => ("1 Pod".to_string(), "is", "it", "holds", "it"),
        n => (format!("{n} Pods"), "are", "they", "hold", "them"),
    };
    let then = match timeout {
        Some(timeout) => format!(
            "the agent force-deletes {them} once the node has not been Ready for {}s (WorkerCluster {cluster} spec.terminatingPodTimeout)",
            timeout.as_secs()
        ),
        None => format!(
            "set WorkerCluster {cluster} spec.terminatingPodTimeout to have the agent force-delete such Pods"
        ),
    };
    Some(format!(
        "{count} of the Job on cluster {cluster} {are} held Terminating on a node that is not Ready: {}; nothing removes {them} until the node answers again or is tainted node.kubernetes.io/out-of-service, and until then {they} {hold} the Job (behind Kueue, its quota); {then}",
        named.join(", "),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(pod: &str, node: &str, secs: u64) -> HeldPod {
        HeldPod {
            pod: pod.into(),
            node: node.into(),
            node_down_for: Duration::from_secs(secs),
        }
    }

    #[test]
    fn one_pod_is_named_with_its_node_and_the_way_out() {
        let note = note("worker-1", &[held("train-x", "n1", 42)], None).unwrap();
        assert_eq!(
            note,
            "1 Pod of the Job on cluster worker-1 is held Terminating on a node that is not Ready: \
             train-x on node n1 (not Ready for 42s); nothing removes it until the node answers again \
             or is tainted node.kubernetes.io/out-of-service, and until then it holds the Job (behind \
             Kueue, its quota); set WorkerCluster worker-1 spec.terminatingPodTimeout to have the \
             agent force-delete such Pods"
        );
    }

    #[test]
    fn with_a_timeout_the_note_says_when_they_are_forced() {
        let pods = [held("a", "n1", 5), held("b", "n2", 7)];
        let note = note("worker-2", &pods, Some(Duration::from_secs(300))).unwrap();
        assert!(
            note.starts_with("2 Pods of the Job on cluster worker-2 are held"),
            "{note}"
        );
        assert!(note.contains("a on node n1 (not Ready for 5s), b on node n2 (not Ready for 7s)"));
        assert!(
            note.ends_with(
                "the agent force-deletes them once the node has not been Ready for 300s (WorkerCluster worker-2 spec.terminatingPodTimeout)"
            ),
            "{note}"
        );
    }

    #[test]
    fn many_pods_are_counted_past_the_first_five_and_none_says_nothing() {
        let pods: Vec<HeldPod> = (0..8).map(|i| held(&format!("p{i}"), "n", 1)).collect();
        let note = note("w", &pods, None).unwrap();
        assert!(
            note.contains("p4 on node n (not Ready for 1s), 3 more;"),
            "{note}"
        );
        assert!(!note.contains("p5 on"));
        assert_eq!(super::note("w", &[], None), None);
    }
}
