//! The quota a worker cluster's own Kueue has free, by ClusterQueue
//! ([`Queue`], read by [`free`] from the fields of a ClusterQueue that say
//! it), and whether a Job queued there fits in it ([`short_of`]). Where the
//! worker's Kueue admits the mirrors it holds, a Job placed on a worker
//! whose queue has no quota free would wait there; Kueue on the worker
//! still has the last word (it may borrow, preempt or be configured in ways
//! this sum does not see).

use std::collections::BTreeMap;

use jobrelay_proto::v1::ClusterQueueRoom;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;

use super::demand::total_of;
use super::quantity::{Round, amount};
use super::{PodGroup, Resources};

/// A ClusterQueue of the worker's Kueue and the quota it has free.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Queue {
    pub name: String,
    /// The LocalQueues that feed it, as `namespace/name`, in order.
    pub local_queues: Vec<String>,
    /// Of each resource it covers, the most one flavor has free: its
    /// nominal quota less what Workloads there reserve. One flavor, as
    /// Kueue gives all Pods of a Job one flavor of each resource group.
    pub free: Resources,
}

impl Queue {
    /// Whether the LocalQueue `namespace/name` feeds it.
    pub fn feeds(&self, local_queue: &str) -> bool {
        self.local_queues.iter().any(|l| l == local_queue)
    }
}

/// The fields of a ClusterQueue its free quota is read from.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueFields {
    #[serde(default)]
    pub spec: ClusterQueueSpec,
    #[serde(default)]
    pub status: ClusterQueueStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueSpec {
    #[serde(default)]
    pub resource_groups: Vec<ResourceGroup>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResourceGroup {
    #[serde(default)]
    pub flavors: Vec<FlavorQuotas>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct FlavorQuotas {
    pub name: String,
    #[serde(default)]
    pub resources: Vec<ResourceQuota>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuota {
    pub name: String,
    pub nominal_quota: Quantity,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueStatus {
    #[serde(default)]
    pub flavors_reservation: Vec<FlavorUsage>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct FlavorUsage {
    pub name: String,
    #[serde(default)]
    pub resources: Vec<ResourceUsage>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResourceUsage {
    pub name: String,
    #[serde(default)]
    pub total: Option<Quantity>,
}

/// What a ClusterQueue has free (see [`Queue::free`]); a quantity that
/// cannot be read counts as none free.
pub fn free(queue: &ClusterQueueFields) -> Resources {
    let mut reserved: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for flavor in &queue.status.flavors_reservation {
        for resource in &flavor.resources {
            let total = resource
                .total
                .as_ref()
                .map_or(Ok(0), |total| amount(&resource.name, total, Round::Up));
            reserved.insert(
                (flavor.name.as_str(), resource.name.as_str()),
                total.unwrap_or(i64::MAX),
            );
        }
    }
    let mut free = Resources::default();
    let flavors = queue.spec.resource_groups.iter().flat_map(|g| &g.flavors);
    for flavor in flavors {
        for resource in &flavor.resources {
            let nominal = amount(&resource.name, &resource.nominal_quota, Round::Down);
            let used = reserved
                .get(&(flavor.name.as_str(), resource.name.as_str()))
                .copied()
                .unwrap_or(0);
            let left = nominal.unwrap_or(0).saturating_sub(used).max(0);
            let most = free.get(&resource.name).max(left);
            free.0.insert(resource.name.clone(), most);
        }
    }
    free
}

/// The resources a queue with `free` covers and has too little free of for
/// all Pods of `groups` (none: they fit).
pub fn short_of(free: &Resources, groups: &[PodGroup]) -> Vec<String> {
    total_of(groups)
        .0
        .iter()
        .filter(|(resource, amount)| free.0.get(*resource).is_some_and(|free| **amount > *free))
        .map(|(resource, _)| resource.clone())
        .collect()
}

/// Takes what `groups` ask of the resources a queue covers out of its
/// `free` quota, never below zero; returns what was taken.
pub fn take(free: &mut Resources, groups: &[PodGroup]) -> Resources {
    let mut taken = Resources::default();
    for (resource, amount) in total_of(groups).0 {
        if let Some(left) = free.0.get_mut(&resource) {
            let here = amount.min(*left);
            *left -= here;
            taken.0.insert(resource, here);
        }
    }
    taken
}

impl From<&Queue> for ClusterQueueRoom {
    fn from(queue: &Queue) -> ClusterQueueRoom {
        ClusterQueueRoom {
            name: queue.name.clone(),
            local_queues: queue.local_queues.clone(),
            free: queue.free.0.clone().into_iter().collect(),
        }
    }
}

impl From<ClusterQueueRoom> for Queue {
    fn from(queue: ClusterQueueRoom) -> Queue {
        let mut local_queues = queue.local_queues;
        local_queues.sort();
        Queue {
            name: queue.name,
            local_queues,
            free: Resources(queue.free.into_iter().collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(json: serde_json::Value) -> ClusterQueueFields {
        serde_json::from_value(json).expect("a ClusterQueue")
    }

    #[test]
    fn each_resource_has_free_what_its_freest_flavor_has() {
        let cq = queue(serde_json::json!({
            "metadata": {"name": "cq"},
            "spec": {"resourceGroups": [{
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {"name": "on-demand", "resources": [
                        {"name": "cpu", "nominalQuota": "8"},
                        {"name": "memory", "nominalQuota": "32Gi"}]},
                    {"name": "spot", "resources": [
                        {"name": "cpu", "nominalQuota": "4"},
                        {"name": "memory", "nominalQuota": "16Gi"}]},
                ],
            }]},
            "status": {"flavorsReservation": [
                {"name": "on-demand", "resources": [
                    {"name": "cpu", "total": "7500m"},
                    {"name": "memory", "total": "1Gi"}]},
                {"name": "spot", "resources": [{"name": "cpu", "total": "0"}]},
            ]},
        }));
        let free = free(&cq);
        assert_eq!(free.get("cpu"), 4000, "spot has 4, on-demand 0.5");
        assert_eq!(free.get("memory"), 31 * (1 << 30));
        assert!(!free.0.contains_key("pods"), "not covered");
    }

    #[test]
    fn a_queue_without_status_has_all_its_quota_free_and_overuse_is_none() {
        let fresh = queue(serde_json::json!({"spec": {"resourceGroups": [{"flavors": [
            {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "2"}]}]}]}}));
        assert_eq!(free(&fresh), Resources::from([("cpu", 2000)]));
        let over = queue(serde_json::json!({
            "spec": {"resourceGroups": [{"flavors": [
                {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "2"}]}]}]},
            "status": {"flavorsReservation": [{"name": "f", "resources": [
                {"name": "cpu", "total": "3"}]}]},
        }));
        assert_eq!(free(&over), Resources::from([("cpu", 0)]), "borrowed");
    }

    #[test]
    fn only_covered_resources_can_be_short() {
        let free = Resources::from([("cpu", 4000)]);
        let job = |pods, cpu| {
            vec![PodGroup {
                pods,
                each: Resources::from([("cpu", cpu), ("memory", 1 << 30), ("pods", 1)]),
                ..PodGroup::default()
            }]
        };
        assert!(short_of(&free, &job(2, 2000)).is_empty());
        assert_eq!(short_of(&free, &job(3, 2000)), ["cpu"]);
    }

    #[test]
    fn taking_quota_takes_only_covered_resources_and_never_below_zero() {
        let mut free = Resources::from([("cpu", 3000)]);
        let job = vec![PodGroup {
            pods: 2,
            each: Resources::from([("cpu", 2000), ("memory", 1), ("pods", 1)]),
            ..PodGroup::default()
        }];
        assert_eq!(take(&mut free, &job), Resources::from([("cpu", 3000)]));
        assert_eq!(free, Resources::from([("cpu", 0)]));
    }

    #[test]
    fn a_queue_survives_the_wire() {
        let queue = Queue {
            name: "cq".into(),
            local_queues: vec!["a/lq".into(), "b/lq".into()],
            free: Resources::from([("cpu", 1000)]),
        };
        assert_eq!(Queue::from(ClusterQueueRoom::from(&queue)), queue);
    }
}
