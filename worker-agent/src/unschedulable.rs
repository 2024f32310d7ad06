//! The mirrors' Pods the worker's scheduler finds no node for, read from the
//! agent's watch of this origin's Pods, and what a mirror's status says of
//! them — how many wait Unschedulable, since when, and the scheduler's
//! message. The manager moves a mirror whose Pods all wait so for its
//! cluster's `unschedulableTimeout`.

use std::sync::Arc;

use jobrelay_proto::v1::Unschedulable;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::report::lasted;

/// The Pod condition the scheduler sets, and its reason when no node fits.
pub const POD_SCHEDULED: &str = "PodScheduled";
const UNSCHEDULABLE: &str = "Unschedulable";

/// What a mirror's status says of its Pods that wait unschedulable:
/// compared between passes, so a status is sent again when it changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    pub pods: u32,
    /// The latest PodScheduled transition among them: since then, all of
    /// them have waited.
    pub since: Timestamp,
    pub message: String,
}

impl Stuck {
    /// The report, its wait measured at `now` on this worker.
    pub fn report(&self, now: Timestamp) -> Unschedulable {
        Unschedulable {
            pods: self.pods,
            waited: lasted(self.since, now),
            message: self.message.clone(),
        }
    }
}

/// Since when `pod` has waited with no node found, and the scheduler's
/// message: only for a Pod that is Pending, not bound, not being deleted,
/// its PodScheduled condition False for reason Unschedulable.
pub fn waiting(pod: &Pod) -> Option<(Timestamp, &str)> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|node| !node.is_empty())
    {
        return None;
    }
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Pending") {
        return None;
    }
    let scheduled = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == POD_SCHEDULED)?;
    if scheduled.status != "False" || scheduled.reason.as_deref() != Some(UNSCHEDULABLE) {
        return None;
    }
    let since = scheduled
        .last_transition_time
        .as_ref()
        .or(pod.metadata.creation_timestamp.as_ref())?;
    Some((since.0, scheduled.message.as_deref().unwrap_or("")))
}

/// What a mirror's status says of `pods` (its unbound Pods): `None` when
/// none of them waits unschedulable. The message is the first Pod's by
/// name, so it does not change with the order the cache lists them in.
pub fn stuck(pods: &[Arc<Pod>]) -> Option<Stuck> {
    let mut waiting: Vec<(&str, Timestamp, &str)> = pods
        .iter()
        .filter_map(|pod| {
            let (since, message) = waiting(pod)?;
            Some((pod.metadata.name.as_deref().unwrap_or(""), since, message))
        })
        .collect();
    waiting.sort_unstable_by_key(|(name, _, _)| *name);
    let (_, _, message) = waiting.first()?;
    Some(Stuck {
        pods: u32::try_from(waiting.len()).unwrap_or(u32::MAX),
        since: waiting.iter().map(|(_, since, _)| *since).max()?,
        message: (*message).to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, phase: &str, scheduled: serde_json::Value) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "ml",
                             "creationTimestamp": "2026-11-29T10:00:00Z"},
                "spec": {"containers": []},
                "status": {"phase": phase, "conditions": [scheduled]},
            }))
            .expect("a Pod"),
        )
    }

    fn unschedulable(at: &str, message: &str) -> serde_json::Value {
        serde_json::json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "lastTransitionTime": at, "message": message})
    }

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a timestamp")
    }

    #[test]
    fn only_a_pending_unbound_pod_the_scheduler_found_no_node_for_waits() {
        let waits = pod(
            "a",
            "Pending",
            unschedulable("2026-11-29T10:00:05Z", "0/2 nodes"),
        );
        assert_eq!(
            waiting(&waits),
            Some((at("2026-11-29T10:00:05Z"), "0/2 nodes"))
        );
        let gated = serde_json::json!({"type": "PodScheduled", "status": "False",
                                       "reason": "SchedulingGated"});
        assert_eq!(waiting(&pod("b", "Pending", gated)), None, "gated");
        let bound = serde_json::json!({"type": "PodScheduled", "status": "True"});
        assert_eq!(waiting(&pod("c", "Pending", bound)), None, "scheduled");
        let failed = pod("d", "Failed", unschedulable("2026-11-29T10:00:05Z", "x"));
        assert_eq!(waiting(&failed), None, "not Pending");
        let mut deleting = (*waits).clone();
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at("2026-11-29T10:01:00Z")),
        );
        assert_eq!(waiting(&deleting), None, "being deleted");
        let mut on_a_node = (*waits).clone();
        if let Some(spec) = on_a_node.spec.as_mut() {
            spec.node_name = Some("n1".into());
        }
        assert_eq!(waiting(&on_a_node), None, "bound");
    }

    #[test]
    fn a_mirror_waits_since_its_latest_pod_began_to_and_says_its_first_pods_message() {
        assert_eq!(stuck(&[]), None);
        let pods = [
            pod(
                "j-b",
                "Pending",
                unschedulable("2026-11-29T10:00:30Z", "second"),
            ),
            pod(
                "j-a",
                "Pending",
                unschedulable("2026-11-29T10:00:10Z", "first"),
            ),
            pod(
                "j-c",
                "Pending",
                serde_json::json!({"type": "PodScheduled", "status": "True"}),
            ),
        ];
        let found = stuck(&pods).expect("two wait");
        assert_eq!(
            found,
            Stuck {
                pods: 2,
                since: at("2026-11-29T10:00:30Z"),
                message: "first".into(),
            }
        );
        let report = found.report(at("2026-11-29T10:02:30Z"));
        assert_eq!(report.pods, 2);
        assert_eq!(report.waited.map(|d| d.seconds), Some(120));
        let early = found.report(at("2026-11-29T10:00:00Z"));
        assert_eq!(
            early.waited.map(|d| d.seconds),
            Some(0),
            "a clock behind the scheduler's reads as no wait"
        );
    }
}
