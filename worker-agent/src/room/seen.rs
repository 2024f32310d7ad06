//! What the room watches keep of Nodes and Pods: only what room is summed
//! from. A Node is kept as its name, labels, whether it is cordoned, its
//! taints, what it has allocatable and whether it is Ready; a Pod as the
//! node it is bound to, what it requests and the mirror it is of, never its
//! spec. Each watch event says whether what is kept changed, so a Pod's
//! status updates and a Node's heartbeats cost no recount.

use std::collections::HashMap;

use jobrelay_kinds::room::{PODS, Pool, Resources, demand, pools};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Pod};
use kube::api::ObjectMeta;
use kube::runtime::watcher::Event;

/// What one watch event did to a [`Listing`].
#[derive(Debug, PartialEq)]
pub enum Taken<V> {
    /// Nothing kept changed (a relist under way, or an update of what is
    /// not kept).
    Nothing,
    /// The object under `key` changed; `was` is what was kept of it before.
    Changed { key: String, was: Option<V> },
    /// A list ended: everything is as it listed.
    Relisted,
}

/// Objects by key, each kept as a `V`, from one watch's events. A relist
/// replaces them only once it is done, so what was kept holds meanwhile.
#[derive(Debug)]
pub struct Listing<V> {
    current: HashMap<String, V>,
    relisting: Option<HashMap<String, V>>,
    listed: bool,
}

impl<V> Default for Listing<V> {
    fn default() -> Self {
        Listing {
            current: HashMap::new(),
            relisting: None,
            listed: false,
        }
    }
}

impl<V: PartialEq> Listing<V> {
    /// Takes one event of objects `K`, keyed by `key` and kept as `keep`
    /// says (`None`: not kept, as if deleted).
    pub fn take<K>(
        &mut self,
        event: Event<K>,
        key: impl Fn(&K) -> String,
        keep: impl Fn(K) -> Option<V>,
    ) -> Taken<V> {
        match event {
            Event::Init => {
                self.relisting = Some(HashMap::new());
                Taken::Nothing
            }
            Event::InitApply(object) => {
                let key = key(&object);
                if let Some(kept) = keep(object) {
                    self.relisting
                        .get_or_insert_with(HashMap::new)
                        .insert(key, kept);
                }
                Taken::Nothing
            }
            Event::InitDone => {
                if let Some(listed) = self.relisting.take() {
                    self.current = listed;
                }
                self.listed = true;
                Taken::Relisted
            }
            Event::Apply(object) => {
                let key = key(&object);
                match keep(object) {
                    Some(kept) if self.current.get(&key) == Some(&kept) => Taken::Nothing,
                    Some(kept) => {
                        let was = self.current.insert(key.clone(), kept);
                        Taken::Changed { key, was }
                    }
                    None => self.remove(key),
                }
            }
            Event::Delete(object) => self.remove(key(&object)),
        }
    }

    fn remove(&mut self, key: String) -> Taken<V> {
        match self.current.remove(&key) {
            Some(was) => Taken::Changed {
                key,
                was: Some(was),
            },
            None => Taken::Nothing,
        }
    }

    /// Whether a first list has ended.
    pub fn listed(&self) -> bool {
        self.listed
    }

    pub fn get(&self, key: &str) -> Option<&V> {
        self.current.get(key)
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.current.values()
    }

    /// What is kept, with its key.
    pub fn entries(&self) -> impl Iterator<Item = (&String, &V)> {
        self.current.iter()
    }

    pub fn len(&self) -> usize {
        self.current.len()
    }
}

/// A bound Pod as the room counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundPod {
    pub node: String,
    pub requests: Resources,
    /// The origin UID of the mirror it is of, if it is one's.
    pub origin: Option<String>,
}

/// The Nodes and the bound, non-terminal Pods the watches saw, and what
/// the Pods use on each node (kept as Pods come and go).
#[derive(Debug, Default)]
pub struct Seen {
    nodes: Listing<Node>,
    pods: Listing<BoundPod>,
    /// By node name: what its Pods request, summed; a node no Pod is
    /// bound to has no entry.
    used: HashMap<String, Resources>,
    /// By origin UID: how many of a mirror's Pods are counted; a mirror
    /// none of whose Pods is has no entry.
    counted: HashMap<String, u32>,
}

impl Seen {
    /// Takes a Node watch event; says whether the room may have changed.
    pub fn node(&mut self, event: Event<Node>) -> bool {
        let taken = self
            .nodes
            .take(event, |node| name(&node.metadata), keep_node);
        !matches!(taken, Taken::Nothing)
    }

    /// Takes a Pod watch event; says whether the room may have changed.
    pub fn pod(&mut self, event: Event<Pod>) -> bool {
        match self.pods.take(event, pod_key, bound) {
            Taken::Nothing => false,
            Taken::Relisted => {
                self.used = HashMap::new();
                self.counted = HashMap::new();
                let pods: Vec<BoundPod> = self.pods.values().cloned().collect();
                for pod in &pods {
                    self.count(pod, 1);
                }
                true
            }
            Taken::Changed { key, was } => {
                if let Some(was) = was {
                    self.count(&was, -1);
                }
                if let Some(now) = self.pods.get(&key).cloned() {
                    self.count(&now, 1);
                }
                true
            }
        }
    }

    /// Counts `pod` once more (`times` 1) or once less (-1): what its node
    /// has in use, and the Pods of its mirror.
    fn count(&mut self, pod: &BoundPod, times: i64) {
        let used = self.used.entry(pod.node.clone()).or_default();
        used.add(&pod.requests, times);
        // Every Pod takes one `pods`: none left, none used.
        if used.get(PODS) == 0 {
            self.used.remove(&pod.node);
        }
        if let Some(origin) = &pod.origin {
            let pods = self.counted.entry(origin.clone()).or_default();
            *pods = match times > 0 {
                true => pods.saturating_add(1),
                false => pods.saturating_sub(1),
            };
            if *pods == 0 {
                self.counted.remove(origin);
            }
        }
    }

    /// How many Pods of each mirror the room counts, by origin UID.
    pub fn counted(&self) -> &HashMap<String, u32> {
        &self.counted
    }

    /// The room by pool, once both watches have listed.
    pub fn pools(&self) -> Option<Vec<Pool>> {
        if !(self.nodes.listed() && self.pods.listed()) {
            return None;
        }
        Some(pools(self.nodes.values(), &self.used))
    }

    /// Nodes and Pods kept, for the log.
    pub fn counts(&self) -> (usize, usize) {
        (self.nodes.len(), self.pods.len())
    }
}

fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// A Pod by UID: a Pod deleted and made again under its name is another.
fn pod_key(pod: &Pod) -> String {
    match &pod.metadata.uid {
        Some(uid) => uid.clone(),
        None => format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            name(&pod.metadata)
        ),
    }
}

/// What the room counts of a Pod: where it is bound and what it requests.
/// A Pod bound to no node is not counted (the watch's field selector keeps
/// those out anyway).
pub fn bound(pod: Pod) -> Option<BoundPod> {
    let spec = pod.spec?;
    let node = spec.node_name.clone().filter(|node| !node.is_empty())?;
    Some(BoundPod {
        node,
        requests: demand::requests(&spec),
        origin: crate::watched::origin_uid(&pod.metadata),
    })
}

/// The Node with only what its room is summed from: its Ready condition
/// without its times, so a kubelet's heartbeat changes nothing kept.
pub fn keep_node(node: Node) -> Option<Node> {
    let spec = node.spec.map(|spec| NodeSpec {
        unschedulable: spec.unschedulable,
        taints: spec.taints,
        ..NodeSpec::default()
    });
    let status = node.status.map(|status| NodeStatus {
        allocatable: status.allocatable,
        conditions: status.conditions.map(|conditions| {
            conditions
                .into_iter()
                .filter(|c| c.type_ == "Ready")
                .map(|c| NodeCondition {
                    type_: c.type_,
                    status: c.status,
                    ..NodeCondition::default()
                })
                .collect()
        }),
        ..NodeStatus::default()
    });
    Some(Node {
        metadata: ObjectMeta {
            name: node.metadata.name,
            labels: node.metadata.labels,
            ..ObjectMeta::default()
        },
        spec,
        status,
    })
}

#[cfg(test)]
#[path = "seen_tests.rs"]
mod tests;
