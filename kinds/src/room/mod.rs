//! Room for Pods on a worker cluster: what its nodes have free, by node pool
//! ([`Pool`], summed up from Nodes and Pods by [`pools`]), what its own
//! Kueue has free ([`quota`]), what a relayed object's Pods ask
//! ([`PodGroup`]), and whether the one holds the other ([`fit`]). Pure: the
//! agent feeds it from its watches, the manager from the agents' reports.

pub mod demand;
pub mod fit;
pub mod pool;
pub mod quantity;
pub mod quota;

use std::collections::BTreeMap;

pub use demand::PodGroup;
pub use pool::{Pool, pools};
pub use quota::Queue;

/// What an agent reports of its worker: the room of its node pools and, where
/// it reads the worker's own Kueue, that Kueue's ClusterQueues.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Room {
    pub pools: Vec<Pool>,
    pub queues: Vec<Queue>,
}

impl Room {
    /// The ClusterQueue that the LocalQueue `namespace/name` feeds, if the
    /// report names it.
    pub fn queue_of(&self, local_queue: &str) -> Option<&Queue> {
        self.queues.iter().find(|q| q.feeds(local_queue))
    }

    /// [`Self::queue_of`], to change.
    pub fn queue_of_mut(&mut self, local_queue: &str) -> Option<&mut Queue> {
        self.queues.iter_mut().find(|q| q.feeds(local_queue))
    }
}

impl From<&Room> for jobrelay_proto::v1::Room {
    fn from(room: &Room) -> Self {
        jobrelay_proto::v1::Room {
            pools: room.pools.iter().map(Into::into).collect(),
            queues: room.queues.iter().map(Into::into).collect(),
        }
    }
}

impl From<jobrelay_proto::v1::Room> for Room {
    fn from(room: jobrelay_proto::v1::Room) -> Self {
        let mut queues: Vec<Queue> = room.queues.into_iter().map(Into::into).collect();
        queues.sort_by(|a, b| a.name.cmp(&b.name));
        Room {
            pools: room.pools.into_iter().map(Into::into).collect(),
            queues,
        }
    }
}

/// The resource every Pod takes one of, whatever it requests.
pub const PODS: &str = "pods";

/// Amounts by resource name, each in its resource's unit (millicores for
/// `cpu`, whole units for every other; see [`quantity`]). A resource not
/// named is zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources(pub BTreeMap<String, i64>);

impl Resources {
    pub fn get(&self, resource: &str) -> i64 {
        self.0.get(resource).copied().unwrap_or(0)
    }

    /// Adds `times` × `other`, saturating; a negative `times` takes away,
    /// never below zero.
    pub fn add(&mut self, other: &Resources, times: i64) {
        for (resource, amount) in &other.0 {
            let sum = self
                .get(resource)
                .saturating_add(amount.saturating_mul(times));
            self.0.insert(resource.clone(), sum.max(0));
        }
    }

    /// Keeps the larger of each amount.
    pub fn max_with(&mut self, other: &Resources) {
        for (resource, amount) in &other.0 {
            let larger = self.get(resource).max(*amount);
            self.0.insert(resource.clone(), larger);
        }
    }

    /// How many times `each` fits in these amounts: as many as the scarcest
    /// of the resources it asks for allows (`i64::MAX` if it asks for none).
    pub fn times(&self, each: &Resources) -> i64 {
        each.0
            .iter()
            .filter(|(_, asked)| **asked > 0)
            .map(|(resource, asked)| self.get(resource) / asked)
            .min()
            .unwrap_or(i64::MAX)
    }

    /// The resources `each` asks more of than these amounts hold.
    pub fn short_of(&self, each: &Resources) -> Vec<String> {
        each.0
            .iter()
            .filter(|(resource, asked)| **asked > self.get(resource))
            .map(|(resource, _)| resource.clone())
            .collect()
    }
}

impl<const N: usize> From<[(&str, i64); N]> for Resources {
    fn from(amounts: [(&str, i64); N]) -> Self {
        Resources(amounts.iter().map(|(r, a)| (r.to_string(), *a)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_add_and_take_away_without_going_below_zero() {
        let mut free = Resources::from([("cpu", 4000), ("pods", 10)]);
        free.add(&Resources::from([("cpu", 1500), ("pods", 1)]), -2);
        assert_eq!(free, Resources::from([("cpu", 1000), ("pods", 8)]));
        free.add(&Resources::from([("cpu", 1500)]), -1);
        assert_eq!(free.get("cpu"), 0);
        free.add(&Resources::from([("nvidia.com/gpu", 2)]), 1);
        assert_eq!(free.get("nvidia.com/gpu"), 2);
    }

    #[test]
    fn the_scarcest_asked_resource_says_how_many_fit() {
        let free = Resources::from([("cpu", 8000), ("memory", 3), ("pods", 100)]);
        let each = Resources::from([("cpu", 2000), ("memory", 1), ("pods", 1)]);
        assert_eq!(free.times(&each), 3);
        assert_eq!(free.times(&Resources::from([("nvidia.com/gpu", 1)])), 0);
        assert_eq!(free.times(&Resources::default()), i64::MAX);
        assert_eq!(
            free.short_of(&Resources::from([("cpu", 9000), ("memory", 3)])),
            ["cpu"]
        );
    }

    #[test]
    fn the_larger_of_each_amount_is_kept() {
        let mut largest = Resources::from([("cpu", 4000), ("memory", 1)]);
        largest.max_with(&Resources::from([
            ("cpu", 2000),
            ("memory", 5),
            ("pods", 3),
        ]));
        assert_eq!(
            largest,
            Resources::from([("cpu", 4000), ("memory", 5), ("pods", 3)])
        );
    }
}
