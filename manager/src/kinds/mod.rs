//! What the manager does differently for each kind it relays, behind one
//! trait: [`RelayedKind`]. `batch/v1` Job ([`job`]) is the first kind.
//!
//! A kind tells the manager:
//! - its name on the wire ([`RelayedKind::NAME`]): an ApplyMirror and a
//!   DeleteMirror carry it, and an object is placed only on a cluster whose
//!   agent named its kind in its Hello (see [`placeable`]);
//! - whether an object is jobrelay's (`spec.managedBy`), suspended, or
//!   finished;
//! - what its cache may drop, and whether an object is whole;
//! - how its mirror is built: what is stripped, which labels go on the
//!   object and on every pod template in it.
//!
//! Placement, sessions, the deletion machine, the orphan sweep, retention
//! and the Kueue check see an object through these only.

pub mod carried;
pub mod demands;
pub mod job;
pub mod job_status;
pub mod jobset;
pub mod jobset_status;
pub mod stores;

use jobrelay_kinds::room::PodGroup;
use std::collections::BTreeMap;
use std::fmt;

use jobrelay_kinds::Object;
use jobrelay_kinds::jobset::JOBSET_UID_LABEL;
use jobrelay_proto::kinds::{self, KindName};
use jobrelay_proto::v1::ObjectKind;
use jobrelay_proto::wire::{ORIGIN_LABEL, ORIGIN_UID_LABEL, OWNER_ANNOTATION, REVISION_ANNOTATION};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;

/// Why an object cannot be mirrored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorError {
    #[error("{kind} has no {field}")]
    Missing {
        kind: &'static str,
        field: &'static str,
    },
    #[error("{kind}: {why}")]
    Invalid { kind: &'static str, why: String },
}

/// A kind of object the manager relays.
pub trait RelayedKind: Object {
    /// Its name on the wire.
    const NAME: KindName;

    /// `spec.managedBy`.
    fn managed_by(&self) -> Option<&str>;

    /// `spec.suspend`.
    fn suspended(&self) -> bool;

    /// Finished for good (for a Job: `Complete` or `Failed`).
    fn is_finished(&self) -> bool;

    /// When it finished: the transition time of the condition that ended it.
    fn finished_at(&self) -> Option<Timestamp>;

    /// How long after it finished the manager object is deleted by its own
    /// `ttlSecondsAfterFinished`, where no controller on the manager cluster
    /// does that for jobrelay (a Job's is the cluster's TTL controller's).
    fn ttl_on_manager(&self) -> Option<std::time::Duration> {
        None
    }

    /// Drops from a cached object what the manager's readers do not use;
    /// the object is read whole from the API server when a mirror is sent.
    fn for_cache(&mut self);

    /// Whether it holds its pod templates, as every object the API server
    /// returns does; a cached copy does not.
    fn is_whole(&self) -> bool;

    /// What its Pods ask of a cluster, read from its pod templates (so from
    /// a whole object).
    fn pod_groups(&self) -> Vec<PodGroup>;

    /// The part of its status a manager object shows of its mirror's, typed:
    /// the copied fields only.
    type Status: Clone
        + std::fmt::Debug
        + Default
        + PartialEq
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Send
        + Sync;

    /// The part of a worker's status (its JSON, as the agent sent it) the
    /// manager object shows.
    fn copied(worker_status: &[u8]) -> serde_json::Result<Self::Status>;

    /// When the worker's object finished, if `copied` shows it finished.
    fn finish_time(copied: &Self::Status) -> Option<Timestamp>;

    /// Whether `status` counts Pods running (for a JobSet: in any of its
    /// replicated Jobs).
    fn runs_pods(status: &Self::Status) -> bool;

    /// What a copied status counts of the mirror's Pods, to tell whether
    /// they all wait for a node and whether one ever ran; `None` for a kind
    /// whose status does not count Pods (its mirror is never moved for
    /// Pods that cannot start).
    fn pods_counted(_copied: &Self::Status) -> Option<PodCounts> {
        None
    }

    /// Whether `status` shows a Pod that started: one ready, or finished
    /// (by default, as [`Self::pods_counted`] counts them).
    fn pods_started(status: &Self::Status) -> bool {
        Self::pods_counted(status).is_some_and(|counts| counts.one_ran())
    }

    /// The copied part of the status the manager object shows now.
    fn shown(&self) -> Self::Status;

    /// The merge patch of the status subresource that makes the object show
    /// `copied`; `None` when it shows that already.
    fn status_patch(&self, copied: &Self::Status) -> Option<Value>;

    /// A copied status whose mirror runs nothing any more: the counts of
    /// what ran stay.
    fn after_suspension(last: &Self::Status) -> Self::Status;

    /// The status that ends the object `Failed` for `reason`, from what it
    /// shows (no mirror runs any more).
    fn failed(shown: &Self::Status, reason: &str, message: &str, now: Timestamp) -> Self::Status;

    /// What the object carries to a mirror placed now from the counts it
    /// shows (see [`carried`]), as the annotation's value; `None`: nothing.
    fn carried(&self) -> Option<String> {
        None
    }

    /// The object to apply on the worker, of the manager's `origin`: same
    /// namespace and name, the origin labels on it and on every pod
    /// template, nothing that must not cross clusters.
    fn mirror(&self, origin: &str) -> Result<Self, MirrorError>;
}

/// A mirror's Pods as its copied status counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodCounts {
    /// Pending or running, not terminating.
    pub active: u32,
    /// Running and ready.
    pub ready: u32,
    /// Succeeded or failed.
    pub ended: u32,
}

impl PodCounts {
    /// Whether a Pod of the mirror ran: one is ready, or one ended.
    pub fn one_ran(&self) -> bool {
        self.ready > 0 || self.ended > 0
    }
}

/// What every mirror carries, of any kind: the object's namespace and name,
/// its labels (but a JobSet's UID label, which would make the mirror read as
/// a JobSet's child on the worker, and jobrelay's own) and the origin
/// labels, its annotations (but jobrelay's own) with the revision and its
/// controlling owner recorded (not referenced); nothing else of its
/// metadata crosses clusters. Also the origin labels, for its templates.
pub fn mirror_metadata<K: RelayedKind>(
    object: &K,
    origin: &str,
) -> Result<(ObjectMeta, BTreeMap<String, String>), MirrorError> {
    let missing = |field| MirrorError::Missing {
        kind: K::NAME.kind,
        field,
    };
    let meta = object.meta();
    let name = meta.name.clone().ok_or(missing("metadata.name"))?;
    let namespace = meta
        .namespace
        .clone()
        .ok_or(missing("metadata.namespace"))?;
    let uid = meta.uid.clone().ok_or(missing("metadata.uid"))?;
    let origin_labels = BTreeMap::from([
        (ORIGIN_LABEL.to_string(), origin.to_string()),
        (ORIGIN_UID_LABEL.to_string(), uid),
    ]);
    let mut own = ObjectMeta {
        labels: meta.labels.clone(),
        annotations: meta.annotations.clone(),
        ..ObjectMeta::default()
    };
    without_own_keys(&mut own);
    let mut labels = own.labels.unwrap_or_default();
    // A worker's agent reads this label as "a child of that JobSet".
    labels.remove(JOBSET_UID_LABEL);
    labels.extend(origin_labels.clone());
    let mut annotations = own.annotations.unwrap_or_default();
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    annotations.insert(REVISION_ANNOTATION.into(), revision(object).to_string());
    if let Some(owner) = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
    {
        annotations.insert(
            OWNER_ANNOTATION.into(),
            format!("{}/{}", owner.kind, owner.name),
        );
    }
    let metadata = ObjectMeta {
        name: Some(name),
        namespace: Some(namespace),
        labels: Some(labels),
        annotations: Some(annotations),
        ..Default::default()
    };
    Ok((metadata, origin_labels))
}

/// `metadata` without any label or annotation of jobrelay's own prefix
/// (`jobrelay.dev/`): one a user wrote — on the object or on any template
/// in it — never reaches a worker, whose agent reads some of them; jobrelay
/// adds its own after.
pub fn without_own_keys(metadata: &mut ObjectMeta) {
    for keys in [&mut metadata.labels, &mut metadata.annotations]
        .into_iter()
        .flatten()
    {
        keys.retain(|key, _| !key.starts_with(OWN_PREFIX));
    }
}

/// The prefix of jobrelay's own labels and annotations.
const OWN_PREFIX: &str = "jobrelay.dev/";

/// The merge patch of the status subresource that makes `fields` read as
/// in `status`: each it lacks is removed (null), whatever the manager's
/// cache shows, so a write that cache has not seen yet is undone too.
fn patch_naming(fields: &[&str], status: &impl serde::Serialize) -> Value {
    let status = serde_json::to_value(status).expect("a typed status is plain JSON");
    let mut patch = serde_json::Map::new();
    for field in fields {
        let value = status.get(*field).cloned().unwrap_or(Value::Null);
        patch.insert((*field).into(), value);
    }
    serde_json::json!({ "status": patch })
}

/// The revision a mirror is applied from: the manager object's generation,
/// which the API server bumps on every spec change.
pub fn revision<K: kube::Resource>(object: &K) -> u64 {
    object.meta().generation.unwrap_or(0).max(0) as u64
}

/// Whether a cluster whose agent named `announced` in its Hello may be
/// given an object of kind `K`.
pub fn placeable<K: RelayedKind>(announced: &[ObjectKind]) -> bool {
    kinds::mirrors(announced, K::NAME)
}

/// The key of a relayed object of any kind: what the fleet keeps for each
/// mirror and what its triggers carry, so one fleet serves every kind's
/// controller.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub kind: KindName,
    pub namespace: String,
    pub name: String,
}

impl Key {
    /// The key of a `K` of that reference.
    pub fn of<K: RelayedKind>(reference: &ObjectRef<K>) -> Key {
        Key {
            kind: K::NAME,
            namespace: reference.namespace.clone().unwrap_or_default(),
            name: reference.name.clone(),
        }
    }

    /// The key of `object`.
    pub fn from_obj<K: RelayedKind>(object: &K) -> Key {
        Key {
            kind: K::NAME,
            namespace: object.namespace().unwrap_or_default(),
            name: object.name_any(),
        }
    }

    /// The reference of a `K`, if this is the key of one.
    pub fn typed<K: RelayedKind>(&self) -> Option<ObjectRef<K>> {
        (self.kind == K::NAME).then(|| ObjectRef::new(&self.name).within(&self.namespace))
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind.kind, self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jobrelay_kinds::jobset::JobSet;
    use jobrelay_proto::kinds::{JOB, JOBSET};
    use k8s_openapi::api::batch::v1::Job;

    #[test]
    fn a_job_goes_to_any_agent_that_names_it_or_names_nothing() {
        assert!(
            placeable::<Job>(&[]),
            "an agent older than kinds mirrors Jobs"
        );
        assert!(placeable::<Job>(&[JOB.to_wire(), JOBSET.to_wire()]));
        assert!(!placeable::<Job>(&[JOBSET.to_wire()]));
    }

    #[test]
    fn running_pods_are_counted_for_a_job_and_a_jobset() {
        use serde_json::json;
        let job = |status| Job::runs_pods(&serde_json::from_value(status).unwrap());
        assert!(job(json!({"active": 1})));
        assert!(!job(json!({"active": 0, "ready": 0})));
        assert!(!job(json!({})));
        let set = |active| {
            JobSet::runs_pods(
                &serde_json::from_value(json!({"replicatedJobsStatus": [
                {"name": "a", "active": 0}, {"name": "b", "active": active}]}))
                .unwrap(),
            )
        };
        assert!(set(2));
        assert!(!set(0));
    }

    #[test]
    fn a_copied_status_is_kept_as_its_kinds_fields_only() {
        let worker = br#"{"active": 2, "uncountedTerminatedPods": {"succeeded": ["p"]}}"#;
        let status = Job::copied(worker).unwrap();
        assert_eq!(status.active, Some(2));
        assert_eq!(status.uncounted_terminated_pods, None);
        assert_eq!(Job::finish_time(&status), None);
    }

    #[test]
    fn a_key_is_typed_back_only_as_its_own_kind() {
        let job = Key::of(&ObjectRef::<Job>::new("train").within("ml"));
        assert_eq!(job.to_string(), "Job ml/train");
        assert_eq!(
            job.typed::<Job>(),
            Some(ObjectRef::new("train").within("ml"))
        );
        assert_eq!(job.typed::<JobSet>(), None);
        let jobset = Key::of(&ObjectRef::<JobSet>::new("train").within("ml"));
        assert_ne!(job, jobset, "same name, another kind");
    }
}
