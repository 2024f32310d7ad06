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

    /// Whether this room has more of something than `before` somewhere — a
    /// pool with more free in all or on one node, a ClusterQueue with more
    /// quota free or fed by other LocalQueues, or either new — so that
    /// something that did not fit `before` may fit now.
    pub fn more_than(&self, before: &Room) -> bool {
        self.pools.iter().any(|pool| pool_grew(&before.pools, pool))
            || self
                .queues
                .iter()
                .any(|queue| queue_grew(&before.queues, queue))
    }
}

/// Whether `pool` has more of some resource, free in all or on one node,
/// than the pool of the same labels and taints in `before` (or is new).
fn pool_grew(before: &[Pool], pool: &Pool) -> bool {
    match before
        .iter()
        .find(|b| b.labels == pool.labels && b.taints == pool.taints)
    {
        Some(was) => pool.free.more_than(&was.free) || pool.largest.more_than(&was.largest),
        None => true,
    }
}

/// Whether `queue` has more of some resource free than the ClusterQueue of
/// its name in `before`, or is fed by other LocalQueues (or is new).
fn queue_grew(before: &[Queue], queue: &Queue) -> bool {
    match before.iter().find(|b| b.name == queue.name) {
        Some(was) => queue.local_queues != was.local_queues || queue.free.more_than(&was.free),
        None => true,
    }
}

impl From<&Room> for jobrelay_proto::v1::Room {
    fn from(room: &Room) -> Self {
        jobrelay_proto::v1::Room {
            pools: room.pools.iter().map(Into::into).collect(),
            queues: room.queues.iter().map(Into::into).collect(),
            // The agent adds the mirrors it counts; the room alone names none.
            counted: Default::default(),
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

    /// Whether these amounts hold more of some resource than `then`.
    pub fn more_than(&self, then: &Resources) -> bool {
        self.0
            .iter()
            .any(|(resource, amount)| *amount > then.get(resource))
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
    fn a_room_is_more_than_another_where_anything_grew_or_is_new() {
        let room = |cpu: i64, largest: i64| Room {
            pools: vec![Pool {
                free: Resources::from([("cpu", cpu)]),
                largest: Resources::from([("cpu", largest)]),
                ..Pool::default()
            }],
            queues: Vec::new(),
        };
        assert!(room(4000, 2000).more_than(&Room::default()), "a new pool");
        assert!(!room(4000, 2000).more_than(&room(4000, 2000)), "the same");
        assert!(!room(3000, 2000).more_than(&room(4000, 2000)), "less");
        assert!(room(5000, 2000).more_than(&room(4000, 2000)), "more in all");
        assert!(
            room(4000, 3000).more_than(&room(4000, 2000)),
            "more on one node"
        );
        let mut gpus = room(4000, 2000);
        gpus.pools[0].labels.insert("pool".into(), "gpu".into());
        assert!(gpus.more_than(&room(4000, 2000)), "another pool");
        let queued = |cpu: i64, local: &str| Room {
            queues: vec![Queue {
                name: "team".into(),
                local_queues: vec![local.into()],
                free: Resources::from([("cpu", cpu)]),
            }],
            ..Room::default()
        };
        assert!(
            !queued(1000, "ns/a").more_than(&queued(2000, "ns/a")),
            "less quota"
        );
        assert!(
            queued(3000, "ns/a").more_than(&queued(2000, "ns/a")),
            "more quota"
        );
        assert!(
            queued(1000, "ns/b").more_than(&queued(2000, "ns/a")),
            "fed anew"
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
