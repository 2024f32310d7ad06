//! What the agent does differently for each kind it mirrors, behind one
//! trait: [`MirrorKind`]. Everything else — the session, applies and their
//! refusals, the deletion machine and its confirmation, losses, the orphan
//! sweep — works on any kind through it. `batch/v1` Job ([`job`]) is the
//! first kind.
//!
//! A kind tells the agent:
//! - its name on the wire ([`MirrorKind::NAME`]), which the agent announces
//!   in its Hello and checks on every apply;
//! - what a mirror's phase is, and whether it finished (its spec is then
//!   left as it ran);
//! - what its reflector may drop, since reports read little of it;
//! - its suspension: what to write before a running mirror is suspended,
//!   and what a worker's own Kueue owns once it queued the mirror.
//!
//! Pods are found by the origin labels the manager puts on every pod
//! template of a mirror, the same for every kind.

pub mod job;

use jobrelay_proto::kinds::{JOB, KindName};
use jobrelay_proto::v1::{MirrorPhase, ObjectKind, RejectReason};
use kube::core::NamespaceResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::report::ApplyFailure;

/// A kind of object the agent mirrors.
pub trait MirrorKind:
    kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
    /// Its name on the wire.
    const NAME: KindName;

    /// The phase of a mirror as the manager sees it.
    fn phase(&self) -> MirrorPhase;

    /// Finished for good: nothing applied later changes how it ran.
    fn is_finished(&self) -> bool;

    /// Drops from a cached mirror what no report reads; applies read the
    /// object they update from the API server, not from the cache.
    fn keep_what_is_reported(&mut self);

    /// Its status as the API server shows it, JSON-encoded (`{}` when it
    /// has none): what a MirrorStatus carries for the manager to copy.
    fn status_json(&self) -> serde_json::Result<Vec<u8>>;

    /// `spec.suspend`.
    fn suspended(&self) -> bool;

    /// What must be written before `desired` is applied over `existing`,
    /// so the update is one the API server takes.
    fn before_update(existing: &Self, desired: &Self) -> Vec<Prepare>;

    /// Keeps in `desired` what a worker's own Kueue owns of `existing`
    /// once it queued the mirror (its `suspend`, its pod templates).
    fn keep_what_kueue_owns(desired: &mut Self, existing: &Self);
}

/// A write that must come before a new revision is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prepare {
    /// Suspend the mirror first.
    Suspend,
    /// Clear `status.startTime`, which Kubernetes' Job controller keeps on a
    /// suspended Job: only a suspended Job without one may have its pod
    /// template's scheduling (node selector, tolerations, labels) changed —
    /// as Kueue does when it evicts and later admits a Job elsewhere.
    ClearStartTime,
}

/// The kinds this agent mirrors, as its Hello names them.
pub fn mirrored() -> Vec<ObjectKind> {
    vec![JOB.to_wire()]
}

/// The refusal of an apply of a kind this agent does not mirror.
pub fn not_mirrored(kind: Option<&ObjectKind>) -> ApplyFailure {
    let kind = kind.cloned().unwrap_or_default();
    let known: Vec<String> = mirrored().iter().map(ToString::to_string).collect();
    ApplyFailure::Refused(
        RejectReason::KindNotMirrored,
        format!(
            "this agent (version {}) does not mirror {kind}; it mirrors {}",
            env!("CARGO_PKG_VERSION"),
            known.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use jobrelay_proto::kinds::JOBSET;

    #[test]
    fn a_kind_not_mirrored_is_refused_naming_it_and_what_is() {
        let ApplyFailure::Refused(reason, message) = not_mirrored(Some(&JOBSET.to_wire())) else {
            panic!("refused");
        };
        assert_eq!(reason, RejectReason::KindNotMirrored);
        assert!(
            !reason.is_permanent(),
            "it clears once the worker serves it"
        );
        assert!(
            message.contains("does not mirror JobSet.jobset.x-k8s.io/v1alpha2")
                && message.contains("it mirrors Job.batch/v1"),
            "{message}"
        );
    }
}
