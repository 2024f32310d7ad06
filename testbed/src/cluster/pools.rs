//! Node pools: kwok Nodes with finite, declared room, so the real
//! kube-scheduler has to fit Pods and can leave one `Unschedulable`. A pool
//! is a name, a number of Nodes, each Node's allocatable (cpu, memory, pods,
//! extended resources such as `nvidia.com/gpu`), labels and taints. Its
//! Nodes are created with that room in their status, which kwok's
//! `node-ready` stage keeps (`tests/controlplane/kwok-stages.yaml`).
//!
//! Test clusters are shared by the tests of a process: a test that adds a
//! pool or cordons a Node puts things back before it ends. [`FiniteRoom`]
//! (`room.rs`) does that for the common case.
//!
//! [`FiniteRoom`]: crate::cluster::room::FiniteRoom

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};

use crate::cluster::KWOK_NODE_ANNOTATION;
use crate::wait::{self, Seen};

/// Node label naming the pool a Node belongs to.
pub const POOL_LABEL: &str = "test.jobrelay.dev/pool";
/// The extended resource of the GPU pool.
pub const GPU: &str = "nvidia.com/gpu";
/// How long adding, removing or cordoning Nodes may take.
pub const NODES_TIMEOUT: Duration = Duration::from_secs(60);

/// Pods a pool Node takes when its description does not say.
const DEFAULT_PODS: &str = "110";

/// Adding, changing or removing a pool's Nodes failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("node {node}: {source}")]
    Api {
        node: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Wait(#[from] wait::Timeout),
}

/// A pool of kwok Nodes alike: `<name>-0`, `<name>-1`, …
#[derive(Debug, Clone, PartialEq)]
pub struct NodePool {
    name: String,
    count: usize,
    allocatable: BTreeMap<String, String>,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
}

impl NodePool {
    /// `count` Nodes with room for 110 Pods and nothing else until the
    /// builder adds it.
    pub fn new(name: &str, count: usize) -> Self {
        NodePool {
            name: name.into(),
            count,
            allocatable: BTreeMap::from([("pods".to_string(), DEFAULT_PODS.to_string())]),
            labels: BTreeMap::new(),
            taints: Vec::new(),
        }
    }

    /// Each Node has `quantity` of `resource` allocatable (and as capacity).
    pub fn allocatable(mut self, resource: &str, quantity: &str) -> Self {
        self.allocatable.insert(resource.into(), quantity.into());
        self
    }

    pub fn cpu(self, quantity: &str) -> Self {
        self.allocatable("cpu", quantity)
    }

    pub fn memory(self, quantity: &str) -> Self {
        self.allocatable("memory", quantity)
    }

    /// Each Node has `count` GPUs ([`GPU`]).
    pub fn gpus(self, count: u32) -> Self {
        self.allocatable(GPU, &count.to_string())
    }

    /// A label on each Node, beside [`POOL_LABEL`].
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// A taint on each Node (`effect`: `NoSchedule`, `PreferNoSchedule`,
    /// `NoExecute`).
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints.push(Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            time_added: None,
        });
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// What each Node declares allocatable, as given.
    pub fn declared(&self) -> &BTreeMap<String, String> {
        &self.allocatable
    }

    /// The label selector of this pool's Nodes.
    pub fn selector(&self) -> String {
        format!("{POOL_LABEL}={}", self.name)
    }

    /// The name of the pool's Node `index` (which may be past `count`: a
    /// pool grows with [`add_node`]).
    pub fn node_name(&self, index: usize) -> String {
        format!("{}-{index}", self.name)
    }

    /// The Node `index` of this pool, as created: annotated for kwok,
    /// labelled, tainted, its room in `status`.
    pub fn node(&self, index: usize) -> Node {
        let name = self.node_name(index);
        let mut labels = self.labels.clone();
        labels.insert(POOL_LABEL.into(), self.name.clone());
        labels.insert("kubernetes.io/hostname".into(), name.clone());
        labels.insert("type".into(), "kwok".into());
        let room: BTreeMap<String, Quantity> = self
            .allocatable
            .iter()
            .map(|(resource, quantity)| (resource.clone(), Quantity(quantity.clone())))
            .collect();
        Node {
            metadata: ObjectMeta {
                name: Some(name),
                labels: Some(labels),
                annotations: Some(BTreeMap::from([(
                    KWOK_NODE_ANNOTATION.to_string(),
                    "fake".to_string(),
                )])),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                taints: (!self.taints.is_empty()).then(|| self.taints.clone()),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                allocatable: Some(room.clone()),
                capacity: Some(room),
                ..Default::default()
            }),
        }
    }
}

/// The standard uneven fleet: two 4-CPU Nodes (`small`), two 16-CPU Nodes
/// (`large`) and one 16-CPU Node with 8 GPUs tainted
/// `nvidia.com/gpu=present:NoSchedule` (`gpu`).
pub fn uneven_fleet() -> Vec<NodePool> {
    vec![
        NodePool::new("small", 2).cpu("4").memory("16Gi"),
        NodePool::new("large", 2).cpu("16").memory("64Gi"),
        NodePool::new("gpu", 1)
            .cpu("16")
            .memory("64Gi")
            .gpus(8)
            .taint(GPU, "present", "NoSchedule"),
    ]
}

/// Creates the pool's Nodes and waits until each is Ready with its declared
/// room; returns their names. Nodes already there are kept.
pub async fn add_pool(client: &kube::Client, pool: &NodePool) -> Result<Vec<String>, Error> {
    let names: Vec<String> = (0..pool.count).map(|i| pool.node_name(i)).collect();
    futures::future::try_join_all((0..pool.count).map(|i| add_node(client, pool, i))).await?;
    Ok(names)
}

/// Creates the pool's Node `index` and waits until it is Ready with its
/// declared room; returns its name.
pub async fn add_node(
    client: &kube::Client,
    pool: &NodePool,
    index: usize,
) -> Result<String, Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = pool.node(index);
    let name = pool.node_name(index);
    let api_err = |source| Error::Api {
        node: name.clone(),
        source,
    };
    // The API server stores quantities in canonical form ("1000m" as "1"):
    // wait for the room it stored, which kwok must keep.
    let stored = match nodes.create(&PostParams::default(), &node).await {
        Ok(created) => created,
        Err(kube::Error::Api(s)) if s.code == 409 => nodes.get(&name).await.map_err(api_err)?,
        Err(source) => return Err(api_err(source)),
    };
    let room = stored
        .status
        .and_then(|s| s.allocatable)
        .unwrap_or_default();
    wait_ready_with(client, &name, &room).await?;
    Ok(name)
}

/// Waits until Node `name` is Ready and has exactly `room` allocatable.
pub async fn wait_ready_with(
    client: &kube::Client,
    name: &str,
    room: &BTreeMap<String, Quantity>,
) -> Result<(), wait::Timeout> {
    let nodes: Api<Node> = Api::all(client.clone());
    wait::try_until(
        format!("node {name} Ready with allocatable {}", show(room)),
        NODES_TIMEOUT,
        || {
            let nodes = nodes.clone();
            async move {
                match nodes.get(name).await {
                    Ok(node) => {
                        let status = node.status.unwrap_or_default();
                        let ready = status
                            .conditions
                            .unwrap_or_default()
                            .iter()
                            .any(|c| c.type_ == "Ready" && c.status == "True");
                        let allocatable = status.allocatable.unwrap_or_default();
                        if ready && &allocatable == room {
                            Seen::Ready(())
                        } else {
                            Seen::Waiting(format!(
                                "ready {ready}, allocatable {}",
                                show(&allocatable)
                            ))
                        }
                    }
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            }
        },
    )
    .await
}

/// Marks Node `name` unschedulable, as `kubectl cordon` does: Pods on it
/// stay, new ones go elsewhere.
pub async fn cordon(client: &kube::Client, name: &str) -> Result<(), Error> {
    set_unschedulable(client, name, true).await
}

/// Lets the scheduler use Node `name` again.
pub async fn uncordon(client: &kube::Client, name: &str) -> Result<(), Error> {
    set_unschedulable(client, name, false).await
}

/// Cordons every Node of the pool (also those it grew by).
pub async fn cordon_pool(client: &kube::Client, pool: &NodePool) -> Result<(), Error> {
    for name in pool_nodes(client, pool).await? {
        cordon(client, &name).await?;
    }
    Ok(())
}

/// Uncordons every Node of the pool.
pub async fn uncordon_pool(client: &kube::Client, pool: &NodePool) -> Result<(), Error> {
    for name in pool_nodes(client, pool).await? {
        uncordon(client, &name).await?;
    }
    Ok(())
}

/// Deletes every Node of the pool (also those it grew by) and waits until
/// they are gone. Pods bound to them are left to whoever created them.
pub async fn remove_pool(client: &kube::Client, pool: &NodePool) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    for name in pool_nodes(client, pool).await? {
        match nodes.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(source) => return Err(Error::Api { node: name, source }),
        }
    }
    let selector = pool.selector();
    wait::try_until(
        format!("every node of pool {} gone", pool.name),
        NODES_TIMEOUT,
        || {
            let (nodes, selector) = (nodes.clone(), selector.clone());
            async move {
                match nodes.list(&ListParams::default().labels(&selector)).await {
                    Ok(list) if list.items.is_empty() => Seen::Ready(()),
                    Ok(list) => Seen::Waiting(format!("{} left", list.items.len())),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            }
        },
    )
    .await?;
    Ok(())
}

/// The names of the pool's Nodes in the cluster now.
async fn pool_nodes(client: &kube::Client, pool: &NodePool) -> Result<Vec<String>, Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default().labels(&pool.selector()))
        .await
        .map_err(|source| Error::Api {
            node: pool.selector(),
            source,
        })?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect())
}

async fn set_unschedulable(client: &kube::Client, name: &str, cordoned: bool) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    // `null` removes the field, as `kubectl uncordon` leaves a Node.
    let unschedulable = cordoned.then_some(true);
    let patch = serde_json::json!({"spec": {"unschedulable": unschedulable}});
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::Api {
            node: name.into(),
            source,
        })?;
    Ok(())
}

fn show(room: &BTreeMap<String, Quantity>) -> String {
    let pairs: Vec<String> = room.iter().map(|(r, q)| format!("{r}={}", q.0)).collect();
    format!("{{{}}}", pairs.join(", "))
}

#[cfg(test)]
#[path = "pools_tests.rs"]
mod tests;
