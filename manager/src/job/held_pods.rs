//! What a Job's user is told when Pods of its mirror are held Terminating
//! on a node that is not Ready (the agent's PodsHeld report): which Pods,
//! on which nodes, since when, what holds them there and what lets them go.
//! Pure; the session publishes it as a `PodsStuckTerminating` warning on
//! the Job, and the admission check of an evicted Workload says it while
//! Kueue keeps the quota for those Pods.

use std::time::Duration;

pub use crate::mirror::HeldPod;

/// Pods named in full; more are counted.
const NAMED: usize = 5;

/// The Event's note for `pods` held on `cluster`, whose
/// `terminatingPodTimeout` is `timeout`; `None` when none is held.
pub fn note(cluster: &str, pods: &[HeldPod], timeout: Option<Duration>) -> Option<String> {
    let held = Held::of(pods, true)?;
    Some(format!(
        "{} of the Job on cluster {cluster} {} held Terminating on a node that is not Ready: {}; {}, and until then {} {} the Job (behind Kueue, its quota); {}",
        held.count,
        held.words.are,
        held.named,
        held.nothing_removes(),
        held.words.they,
        held.words.hold,
        held.way_out(cluster, timeout),
    ))
}

/// What the admission check of an evicted Workload says while Kueue keeps
/// its quota for `pods` of its mirror held on `cluster`: the same as the
/// note, without how long each node has been down, so that the message
/// changes only when the Pods held do; `None` when none is held.
pub fn holding_quota(cluster: &str, pods: &[HeldPod], timeout: Option<Duration>) -> Option<String> {
    let held = Held::of(pods, false)?;
    Some(format!(
        "Kueue keeps the Workload's quota until its mirror's Pods are gone from cluster {cluster}, and {} {} held Terminating on a node that is not Ready: {}; {}; {}",
        held.count,
        held.words.are,
        held.named,
        held.nothing_removes(),
        held.way_out(cluster, timeout),
    ))
}

/// `pods` in words.
struct Held {
    count: String,
    named: String,
    words: Words,
}

/// The words that agree with a count of Pods.
struct Words {
    are: &'static str,
    they: &'static str,
    hold: &'static str,
    them: &'static str,
}

impl Held {
    /// The first [`NAMED`] Pods by name and node (and how long the node
    /// has been down, if `down_for`), the rest counted; `None` for none.
    fn of(pods: &[HeldPod], down_for: bool) -> Option<Self> {
        let (first, rest) = pods.split_at(pods.len().min(NAMED));
        if first.is_empty() {
            return None;
        }
        let mut named: Vec<String> = first
            .iter()
            .map(|p| match down_for {
                true => {
                    let down = p.node_down_for.as_secs();
                    format!("{} on node {} (not Ready for {down}s)", p.pod, p.node)
                }
                false => format!("{} on node {}", p.pod, p.node),
            })
            .collect();
        if !rest.is_empty() {
            named.push(format!("{} more", rest.len()));
        }
        let (count, words) = match pods.len() {
            1 => (
                "1 Pod".to_string(),
                Words {
                    are: "is",
                    they: "it",
                    hold: "holds",
                    them: "it",
                },
            ),
            n => (
                format!("{n} Pods"),
                Words {
                    are: "are",
                    they: "they",
                    hold: "hold",
                    them: "them",
                },
            ),
        };
        Some(Held {
            count,
            named: named.join(", "),
            words,
        })
    }

    fn nothing_removes(&self) -> String {
        format!(
            "nothing removes {} until the node answers again or is tainted node.kubernetes.io/out-of-service",
            self.words.them
        )
    }

    /// What lets them go: the agent's force delete, or how to opt in to it.
    fn way_out(&self, cluster: &str, timeout: Option<Duration>) -> String {
        match timeout {
            Some(timeout) => format!(
                "the agent force-deletes {} once the node has not been Ready for {}s (WorkerCluster {cluster} spec.terminatingPodTimeout)",
                self.words.them,
                timeout.as_secs()
            ),
            None => format!(
                "set WorkerCluster {cluster} spec.terminatingPodTimeout to have the agent force-delete such Pods"
            ),
        }
    }
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

    #[test]
    fn the_checks_message_names_the_pods_without_how_long_so_it_changes_only_with_them() {
        let pods = [held("a", "n1", 5), held("b", "n2", 7)];
        let message = holding_quota("worker-2", &pods, None).unwrap();
        assert_eq!(
            message,
            "Kueue keeps the Workload's quota until its mirror's Pods are gone from cluster \
             worker-2, and 2 Pods are held Terminating on a node that is not Ready: a on node n1, \
             b on node n2; nothing removes them until the node answers again or is tainted \
             node.kubernetes.io/out-of-service; set WorkerCluster worker-2 \
             spec.terminatingPodTimeout to have the agent force-delete such Pods"
        );
        let later = [held("a", "n1", 50), held("b", "n2", 70)];
        assert_eq!(holding_quota("worker-2", &later, None), Some(message));
        assert_eq!(holding_quota("worker-2", &[], None), None);
    }
}
