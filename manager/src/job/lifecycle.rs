//! Where a manager Job stands, as far as its mirror is concerned: whether
//! jobrelay relays it at all, its [`Lifecycle`] and whether it holds the
//! remote-cleanup finalizer. Placement, retention and the Job's life all
//! start from these facts.

use jobrelay_proto::wire::MANAGED_BY;

use crate::kinds::RelayedKind;

/// Where a manager Job stands, as far as its mirror is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Should run on a worker.
    Active,
    /// Suspended: its mirror, if it has one, is kept suspended (no Pods).
    Suspended,
    /// Complete or Failed: the mirror goes once its retention ran out.
    Finished,
    /// Being deleted: the mirror goes, then the finalizer.
    Deleting,
}

/// Is this object one jobrelay mirrors?
pub fn is_relayed<K: RelayedKind>(object: &K) -> bool {
    object.managed_by() == Some(MANAGED_BY)
}

pub fn lifecycle<K: RelayedKind>(object: &K) -> Lifecycle {
    if object.meta().deletion_timestamp.is_some() {
        Lifecycle::Deleting
    } else if object.is_finished() {
        Lifecycle::Finished
    } else if object.suspended() {
        Lifecycle::Suspended
    } else {
        Lifecycle::Active
    }
}

/// Held by jobrelay's remote-cleanup finalizer.
pub fn has_finalizer<K: kube::Resource>(object: &K) -> bool {
    object
        .meta()
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == jobrelay_proto::wire::REMOTE_CLEANUP_FINALIZER)
}
