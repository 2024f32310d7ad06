//! What the agent's Hello says of the worker: every mirror found there (its
//! inventory), and the manager instances the mirrors name.

use std::collections::HashMap;

use jobrelay_proto::v1::{InventoryEntry, MirrorPhase};
use jobrelay_proto::wire::MANAGER_INSTANCE_LABEL;
use kube::Resource;

use super::{Mirrors, origin_uid};
use crate::kinds::{self, Mirror};
use crate::report::revision_of;

impl Mirrors {
    /// The manager instances this origin's mirrors name, each once: only
    /// the mirrors the agent wrote itself, never their children (a
    /// JobSet's Jobs), whose labels come from templates a user wrote.
    pub fn manager_instances(&self) -> Vec<String> {
        let mut instances: Vec<String> = self
            .objects
            .state()
            .iter()
            .map(|object| object.object_meta())
            .filter(|meta| kinds::parent(meta).is_none())
            .filter_map(|meta| meta.labels.as_ref()?.get(MANAGER_INSTANCE_LABEL).cloned())
            .collect();
        instances.sort_unstable();
        instances.dedup();
        instances
    }

    /// Every mirror found on the worker: mirrors of this origin (not their
    /// children), and origin UIDs that only children or Pods still carry —
    /// one entry per origin UID and namespace, so the manager can take the
    /// one in its Job's namespace and no copy elsewhere.
    pub fn inventory(&self) -> Vec<InventoryEntry> {
        let mut entries: HashMap<(String, String), InventoryEntry> = HashMap::new();
        let mut children = Vec::new();
        for object in self.objects.state() {
            let meta = object.object_meta();
            let Some(uid) = origin_uid(meta) else {
                continue;
            };
            let namespace = meta.namespace.clone().unwrap_or_default();
            if kinds::parent(meta).is_some() {
                children.push((uid, namespace));
                continue;
            }
            // The fence's own write may not be in the cache yet.
            let fenced = self.records.get(&uid).is_some_and(|r| r.fenced);
            entries.insert(
                (uid.clone(), namespace.clone()),
                InventoryEntry {
                    origin_uid: uid,
                    revision: if fenced { 0 } else { revision_of(meta) },
                    phase: self.phase(object.as_ref()) as i32,
                    kind: Some(object.kind_name().to_wire()),
                    namespace,
                },
            );
        }
        let pod_uids = self.pods.state().into_iter().filter_map(|pod| {
            let uid = origin_uid(pod.meta())?;
            Some((uid, pod.meta().namespace.clone().unwrap_or_default()))
        });
        for (uid, namespace) in children.into_iter().chain(pod_uids) {
            entries
                .entry((uid.clone(), namespace.clone()))
                .or_insert_with(|| InventoryEntry {
                    origin_uid: uid,
                    revision: 0,
                    phase: MirrorPhase::Deleting as i32,
                    kind: None,
                    namespace,
                });
        }
        entries.into_values().collect()
    }

    fn phase(&self, mirror: &dyn Mirror) -> MirrorPhase {
        match origin_uid(mirror.object_meta()) {
            Some(uid) if self.is_deleting(&uid) => MirrorPhase::Deleting,
            _ => mirror.mirror_phase(),
        }
    }
}
