//! What the room watches keep of the worker's own Kueue (`--room-kueue`):
//! of a ClusterQueue the quota it has free (`jobrelay_kinds::room::quota`),
//! of a LocalQueue the ClusterQueue it feeds. Each event says whether what
//! is kept changed, so Kueue's status updates that change no free quota
//! cost no report.

use std::collections::BTreeMap;

use jobrelay_kinds::room::Resources;
use jobrelay_kinds::room::quota::{self, ClusterQueueFields, Queue};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::Event;

use super::seen::{Listing, Taken};

/// The group and version of Kueue's objects the agent reads.
const GROUP: &str = "kueue.x-k8s.io";
const VERSION: &str = "v1beta2";

/// The API resource of Kueue's `kind` (ClusterQueue, LocalQueue).
pub fn resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(GROUP, VERSION, kind))
}

/// ClusterQueues by name, kept as their free quota; LocalQueues by
/// `namespace/name`, kept as the ClusterQueue they feed.
#[derive(Debug, Default)]
pub struct Queues {
    cluster_queues: Listing<Resources>,
    local_queues: Listing<String>,
}

impl Queues {
    /// Takes a ClusterQueue watch event; says whether what is kept changed.
    pub fn cluster_queue(&mut self, event: Event<DynamicObject>) -> bool {
        let taken =
            self.cluster_queues
                .take(event, |q| q.metadata.name.clone().unwrap_or_default(), free);
        !matches!(taken, Taken::Nothing)
    }

    /// Takes a LocalQueue watch event; says whether what is kept changed.
    pub fn local_queue(&mut self, event: Event<DynamicObject>) -> bool {
        let taken = self.local_queues.take(event, local_queue_key, feeds);
        !matches!(taken, Taken::Nothing)
    }

    /// Every ClusterQueue with the LocalQueues that feed it, by name, once
    /// both watches have listed.
    pub fn queues(&self) -> Option<Vec<Queue>> {
        if !(self.cluster_queues.listed() && self.local_queues.listed()) {
            return None;
        }
        let mut fed: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (local, cluster_queue) in self.local_queues.entries() {
            fed.entry(cluster_queue.as_str())
                .or_default()
                .push(local.clone());
        }
        let mut queues: Vec<Queue> = self
            .cluster_queues
            .entries()
            .map(|(name, free)| {
                let mut local_queues = fed.remove(name.as_str()).unwrap_or_default();
                local_queues.sort();
                Queue {
                    name: name.clone(),
                    local_queues,
                    free: free.clone(),
                }
            })
            .collect();
        queues.sort_by(|a, b| a.name.cmp(&b.name));
        Some(queues)
    }
}

/// What a ClusterQueue has free; one whose fields cannot be read has none.
fn free(queue: DynamicObject) -> Option<Resources> {
    let fields: ClusterQueueFields = serde_json::from_value(queue.data).unwrap_or_default();
    Some(quota::free(&fields))
}

fn local_queue_key(queue: &DynamicObject) -> String {
    format!(
        "{}/{}",
        queue.metadata.namespace.as_deref().unwrap_or_default(),
        queue.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The ClusterQueue a LocalQueue feeds.
fn feeds(queue: DynamicObject) -> Option<String> {
    queue.data["spec"]["clusterQueue"]
        .as_str()
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(json: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json).expect("an object")
    }

    fn cluster_queue(name: &str, nominal: &str, reserved: &str) -> DynamicObject {
        object(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "f", "resources": [{"name": "cpu", "nominalQuota": nominal}]}]}]},
            "status": {"flavorsReservation": [{"name": "f", "resources": [
                {"name": "cpu", "total": reserved}]}],
                "pendingWorkloads": 3},
        }))
    }

    fn local_queue(namespace: &str, name: &str, cluster_queue: &str) -> DynamicObject {
        object(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        }))
    }

    #[test]
    fn each_cluster_queue_is_known_with_what_it_has_free_and_who_feeds_it() {
        let mut queues = Queues::default();
        queues.cluster_queue(Event::Init);
        queues.cluster_queue(Event::InitApply(cluster_queue("team", "4", "1")));
        queues.cluster_queue(Event::InitDone);
        assert_eq!(queues.queues(), None, "not before both have listed");
        queues.local_queue(Event::Init);
        queues.local_queue(Event::InitApply(local_queue("a", "lq", "team")));
        queues.local_queue(Event::InitApply(local_queue("b", "lq", "other")));
        queues.local_queue(Event::InitDone);
        let team = Queue {
            name: "team".into(),
            local_queues: vec!["a/lq".into()],
            free: Resources::from([("cpu", 3000)]),
        };
        assert_eq!(queues.queues(), Some(vec![team.clone()]));

        let mut counted = cluster_queue("team", "4", "1");
        counted.data["status"]["pendingWorkloads"] = 5.into();
        assert!(
            !queues.cluster_queue(Event::Apply(counted)),
            "a status change that frees nothing is no change"
        );
        assert!(queues.cluster_queue(Event::Apply(cluster_queue("team", "4", "4"))));
        assert!(queues.local_queue(Event::Apply(local_queue("c", "lq", "team"))));
        let full = Queue {
            local_queues: vec!["a/lq".into(), "c/lq".into()],
            free: Resources::from([("cpu", 0)]),
            ..team
        };
        assert_eq!(queues.queues(), Some(vec![full]));
    }
}
