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
//! Child objects (a JobSet's Jobs) and Pods are found by the origin labels
//! the manager puts on every Job and pod template of a mirror, the same for
//! every kind; [`Mirror`] is a mirror object of any kind, as the agent's
//! passes see it, and [`objects::Objects`] holds the caches by kind.

pub mod job;
pub mod jobset;
pub mod objects;

use jobrelay_kinds::Object;
use jobrelay_kinds::jobset::JOBSET_UID_LABEL;
use jobrelay_proto::kinds::{JOB, KindName};
use jobrelay_proto::v1::{MirrorPhase, ObjectKind, RejectReason};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::report::ApplyFailure;

/// A kind of object the agent mirrors.
pub trait MirrorKind: Object {
    /// Its name on the wire.
    const NAME: KindName;

    /// The phase of a mirror as the manager sees it.
    fn phase(&self) -> MirrorPhase;

    /// Finished for good: nothing applied later changes how it ran.
    fn is_finished(&self) -> bool;

    /// Drops from a cached mirror what no report reads; an apply that must
    /// read the object it updates (its pod template, say) reads it from the
    /// API server, not from the cache.
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

/// A mirror object of any kind, as the agent's passes see it: a mirror, or
/// a child object of one (a JobSet's Job).
pub trait Mirror: Send + Sync + std::fmt::Debug {
    fn object_meta(&self) -> &ObjectMeta;
    fn kind_name(&self) -> KindName;
    fn mirror_phase(&self) -> MirrorPhase;
    fn status_bytes(&self) -> serde_json::Result<Vec<u8>>;
    /// The object as its own kind, to be downcast.
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<K: MirrorKind + 'static> Mirror for K {
    fn object_meta(&self) -> &ObjectMeta {
        self.meta()
    }

    fn kind_name(&self) -> KindName {
        K::NAME
    }

    fn mirror_phase(&self) -> MirrorPhase {
        self.phase()
    }

    fn status_bytes(&self) -> serde_json::Result<Vec<u8>> {
        self.status_json()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The UID of the mirror `object` is a child of (a JobSet's Job names its
/// JobSet in a label the JobSet controller sets), if any. Read from the
/// label, not the owner reference, so a child left behind by an Orphan
/// delete of its JobSet is still known for one.
pub fn parent(object: &ObjectMeta) -> Option<&str> {
    object
        .labels
        .as_ref()?
        .get(JOBSET_UID_LABEL)
        .map(String::as_str)
}

/// The kinds mirrored where the worker serves `served`: Jobs always.
pub fn mirrored(served: &[KindName]) -> Vec<ObjectKind> {
    let mut kinds = vec![JOB.to_wire()];
    kinds.extend(served.iter().filter(|k| **k != JOB).map(|k| k.to_wire()));
    kinds
}

/// The refusal of an apply of a kind this agent does not mirror.
pub fn not_mirrored(kind: Option<&ObjectKind>, served: &[KindName]) -> ApplyFailure {
    let kind = kind.cloned().unwrap_or_default();
    let known: Vec<String> = mirrored(served).iter().map(ToString::to_string).collect();
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
        let ApplyFailure::Refused(reason, message) = not_mirrored(Some(&JOBSET.to_wire()), &[])
        else {
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

    #[test]
    fn jobsets_are_mirrored_only_where_the_worker_serves_them() {
        assert_eq!(mirrored(&[]), [JOB.to_wire()]);
        assert_eq!(mirrored(&[JOBSET]), [JOB.to_wire(), JOBSET.to_wire()]);
    }

    #[test]
    fn a_jobsets_job_names_the_jobset_as_its_parent_owned_or_orphaned() {
        let child: ObjectMeta = serde_json::from_value(serde_json::json!({
            "labels": {JOBSET_UID_LABEL: "p"}}))
        .unwrap();
        assert_eq!(parent(&child), Some("p"));
        let job: ObjectMeta = serde_json::from_value(serde_json::json!({"ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "CronJob", "name": "n", "uid": "c", "controller": true}]}))
        .unwrap();
        assert_eq!(parent(&job), None);
    }
}
