//! What a new session's inventory says of each mirror the fleet tracks:
//! the entry of its origin UID in its Job's namespace. An agent names the
//! namespace of each entry, and an origin UID found in two namespaces is
//! two entries; objects elsewhere than the Job's namespace (a worker user's
//! copy of the mirror's labels) are not the mirror, and never stand for it.

use std::collections::HashMap;

use jobrelay_proto::v1::{InventoryEntry, MirrorPhase};

/// The inventory's entries by origin UID.
pub(super) struct Inventory<'a> {
    by_uid: HashMap<&'a str, Vec<&'a InventoryEntry>, foldhash::fast::RandomState>,
}

impl<'a> Inventory<'a> {
    pub fn new(entries: &'a [InventoryEntry]) -> Self {
        let mut by_uid: HashMap<&str, Vec<&InventoryEntry>, _> = HashMap::default();
        for entry in entries {
            by_uid
                .entry(entry.origin_uid.as_str())
                .or_default()
                .push(entry);
        }
        Inventory { by_uid }
    }

    /// What the worker holds of the mirror of `uid` in `namespace`: its
    /// revision and phase. An entry that names no namespace (an older
    /// agent) counts wherever it is.
    pub fn held(&self, uid: &str, namespace: &str) -> Option<(u64, MirrorPhase)> {
        self.by_uid
            .get(uid)?
            .iter()
            .find(|entry| entry.namespace.is_empty() || entry.namespace == namespace)
            .map(|entry| (entry.revision, entry.phase()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(uid: &str, namespace: &str, revision: u64) -> InventoryEntry {
        InventoryEntry {
            origin_uid: uid.into(),
            namespace: namespace.into(),
            revision,
            phase: MirrorPhase::Running as i32,
            ..Default::default()
        }
    }

    #[test]
    fn the_entry_in_the_jobs_namespace_stands_for_its_mirror() {
        let entries = [entry("u1", "team-a", 3)];
        let inventory = Inventory::new(&entries);
        assert_eq!(
            inventory.held("u1", "team-a"),
            Some((3, MirrorPhase::Running))
        );
        assert_eq!(inventory.held("u2", "team-a"), None);
    }

    #[test]
    fn an_entry_in_another_namespace_is_not_the_mirror() {
        let entries = [entry("u1", "team-b", 9)];
        assert_eq!(Inventory::new(&entries).held("u1", "team-a"), None);
        let both = [entry("u1", "team-b", 9), entry("u1", "team-a", 3)];
        assert_eq!(
            Inventory::new(&both).held("u1", "team-a"),
            Some((3, MirrorPhase::Running)),
            "of one origin UID in two namespaces, the Job's"
        );
    }

    #[test]
    fn an_entry_naming_no_namespace_counts_wherever_it_is() {
        let entries = [entry("u1", "", 2)];
        assert_eq!(
            Inventory::new(&entries).held("u1", "team-a"),
            Some((2, MirrorPhase::Running))
        );
    }
}
