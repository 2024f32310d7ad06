//! A worker cluster's room by node pool, as its agent sums it up from its
//! Nodes and the Pods bound to them, and as it travels to the manager.

use std::collections::{BTreeMap, HashMap};

use jobrelay_proto::v1::{NodePool, Taint as WireTaint};
use k8s_openapi::api::core::v1::Node;

use super::Resources;
use super::quantity::{Round, amount};

/// The node label that differs on every node, so no pool is keyed by it.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Schedulable nodes that a Pod selects alike, and the room they have left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pool {
    pub labels: BTreeMap<String, String>,
    /// NoSchedule and NoExecute taints, in order.
    pub taints: Vec<Taint>,
    pub nodes: u32,
    /// Allocatable less what bound, non-terminal Pods request, summed.
    pub free: Resources,
    /// The most of each resource free on any one node.
    pub largest: Resources,
}

impl Pool {
    /// One unlabelled, untainted node with `free` room.
    pub fn one_node(free: Resources) -> Pool {
        Pool {
            nodes: 1,
            largest: free.clone(),
            free,
            ..Pool::default()
        }
    }
}

/// A taint that keeps Pods off a pool unless they tolerate it.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

/// The pools of `nodes`, given what the Pods bound to each node request
/// (`used`, by node name), in the order of their labels and taints.
/// Cordoned nodes, and nodes not Ready, are in none.
pub fn pools<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    used: &HashMap<String, Resources>,
) -> Vec<Pool> {
    let mut pools: BTreeMap<(BTreeMap<String, String>, Vec<Taint>), Pool> = BTreeMap::new();
    for node in nodes.into_iter().filter(|n| schedulable(n)) {
        let key = (labels(node), taints(node));
        let mut free = allocatable(node);
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if let Some(used) = used.get(name) {
            free.add(used, -1);
        }
        let pool = pools.entry(key.clone()).or_insert_with(|| Pool {
            labels: key.0,
            taints: key.1,
            ..Pool::default()
        });
        pool.nodes += 1;
        pool.free.add(&free, 1);
        pool.largest.max_with(&free);
    }
    pools.into_values().collect()
}

fn schedulable(node: &Node) -> bool {
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    ready && !cordoned
}

fn labels(node: &Node) -> BTreeMap<String, String> {
    let mut labels = node.metadata.labels.clone().unwrap_or_default();
    labels.remove(HOSTNAME_LABEL);
    labels
}

fn taints(node: &Node) -> Vec<Taint> {
    let mut taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .map(|t| Taint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.clone(),
        })
        .collect();
    taints.sort();
    taints
}

fn allocatable(node: &Node) -> Resources {
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    Resources(
        allocatable
            .into_iter()
            .flatten()
            .filter_map(|(resource, quantity)| {
                let amount = amount(resource, quantity, Round::Down).ok()?;
                Some((resource.clone(), amount))
            })
            .collect(),
    )
}

impl From<&Pool> for NodePool {
    fn from(pool: &Pool) -> NodePool {
        NodePool {
            labels: pool.labels.clone().into_iter().collect(),
            taints: pool
                .taints
                .iter()
                .map(|t| WireTaint {
                    key: t.key.clone(),
                    value: t.value.clone(),
                    effect: t.effect.clone(),
                })
                .collect(),
            nodes: pool.nodes,
            free: pool.free.0.clone().into_iter().collect(),
            largest: pool.largest.0.clone().into_iter().collect(),
        }
    }
}

impl From<NodePool> for Pool {
    fn from(pool: NodePool) -> Pool {
        let mut taints: Vec<Taint> = pool
            .taints
            .into_iter()
            .map(|t| Taint {
                key: t.key,
                value: t.value,
                effect: t.effect,
            })
            .collect();
        taints.sort();
        Pool {
            labels: pool.labels.into_iter().collect(),
            taints,
            nodes: pool.nodes,
            free: Resources(pool.free.into_iter().collect()),
            largest: Resources(pool.largest.into_iter().collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, pool: &str, cpu: &str, ready: bool, cordoned: bool) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"pool": pool, HOSTNAME_LABEL: name}},
            "spec": {
                "unschedulable": cordoned,
                "taints": if pool == "gpu" {
                    serde_json::json!([
                        {"key": "gpu", "value": "yes", "effect": "NoSchedule"},
                        {"key": "soft", "effect": "PreferNoSchedule"},
                    ])
                } else {
                    serde_json::json!([])
                },
            },
            "status": {
                "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}],
            },
        }))
        .expect("a Node")
    }

    #[test]
    fn nodes_alike_but_for_their_hostname_make_one_pool_less_what_is_used() {
        let nodes = [
            node("small-0", "small", "4", true, false),
            node("small-1", "small", "4", true, false),
            node("big-0", "big", "16", true, false),
        ];
        let used = HashMap::from([(
            "small-0".to_string(),
            Resources::from([("cpu", 3000), ("pods", 2)]),
        )]);
        let pools = pools(&nodes, &used);
        let small = pools
            .iter()
            .find(|p| p.labels["pool"] == "small")
            .expect("small");
        assert_eq!(small.nodes, 2);
        assert_eq!(small.free.get("cpu"), 5000);
        assert_eq!(small.free.get("pods"), 218);
        assert_eq!(small.largest.get("cpu"), 4000, "small-1 is untouched");
        assert!(!small.labels.contains_key(HOSTNAME_LABEL));
        assert_eq!(pools.len(), 2);
    }

    #[test]
    fn cordoned_and_not_ready_nodes_have_no_room() {
        let nodes = [
            node("a", "small", "4", false, false),
            node("b", "small", "4", true, true),
        ];
        assert!(pools(&nodes, &HashMap::new()).is_empty());
    }

    #[test]
    fn only_taints_that_keep_pods_off_key_a_pool_and_it_survives_the_wire() {
        let nodes = [node("g", "gpu", "8", true, false)];
        let pool = pools(&nodes, &HashMap::new()).remove(0);
        assert_eq!(
            pool.taints,
            [Taint {
                key: "gpu".into(),
                value: "yes".into(),
                effect: "NoSchedule".into()
            }]
        );
        assert_eq!(Pool::from(NodePool::from(&pool)), pool);
    }
}
