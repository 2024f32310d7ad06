//! jobrelay's record of where a Job runs, which only jobrelay can write.
//!
//! The record is the annotation `jobrelay.dev/cluster` beside a seal,
//! `jobrelay.dev/placement-seal: v1:<mac>:<cluster>`, where the mac is an
//! HMAC-SHA256, under a key only the manager holds, of the Job's UID and the
//! cluster. A tenant who may edit the Job can write either annotation, but
//! not a seal that opens for this Job's UID: a seal copied from another Job
//! names another UID, and one made up fails the mac. So the seal, not the
//! plain annotation, says where the Job runs; the plain annotation is what
//! a user reads, and jobrelay restores it when someone changes it.
//!
//! A Job created before the first manager that seals records led (placed
//! by an earlier jobrelay, which wrote no seal) keeps its unsealed record,
//! and is sealed at once. Pure: the manager's cache rewrites each Job's
//! annotations by [`judge`] as it stores it, so every reader of the cache
//! sees only the record jobrelay wrote.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jobrelay_proto::wire::CLUSTER_KEY;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use ring::hmac;
use std::sync::{Arc, RwLock};

/// Annotation beside [`CLUSTER_KEY`]: the seal of the record.
pub use jobrelay_proto::wire::PLACEMENT_SEAL_ANNOTATION as SEAL_ANNOTATION;
/// Kept in the manager's cache only, never written: what the Job's own
/// `jobrelay.dev/cluster` annotation said where it differs from jobrelay's
/// record (empty: it had none), so the record is written again.
pub const CLAIMED_ANNOTATION: &str = "jobrelay.dev/placement-claimed";
/// The version of the seal's format.
const VERSION: &str = "v1";

/// The manager's key for seals, and since when records are sealed: since
/// the first manager that seals them led. Until then no record is sealed,
/// and every unsealed one is an earlier jobrelay's. Shared by every copy.
#[derive(Clone, Default)]
pub struct Sealer {
    sealing: Arc<RwLock<Option<Sealing>>>,
}

/// A key, and since when records are sealed with it.
#[derive(Clone)]
struct Sealing {
    key: hmac::Key,
    since: Timestamp,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("since", &self.since())
            .finish_non_exhaustive()
    }
}

impl Sealer {
    /// A sealer of `secret` (the key's bytes), sealing records since
    /// `since`.
    pub fn new(secret: &[u8], since: Timestamp) -> Self {
        let sealer = Sealer::default();
        sealer.seal_since(secret, since);
        sealer
    }

    /// Records are sealed with `secret` since `since`: an unsealed record
    /// of a Job created since is not jobrelay's.
    pub fn seal_since(&self, secret: &[u8], since: Timestamp) {
        let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
        *self.sealing.write().unwrap_or_else(|p| p.into_inner()) = Some(Sealing { key, since });
    }

    fn sealing(&self) -> Option<Sealing> {
        self.sealing
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Since when records are sealed, once they are.
    pub fn since(&self) -> Option<Timestamp> {
        self.sealing().map(|s| s.since)
    }

    /// The seal recording that the Job `uid` runs on `cluster`; `None`
    /// while records are not sealed.
    pub fn seal(&self, uid: &str, cluster: &str) -> Option<String> {
        let mac = hmac::sign(&self.sealing()?.key, &message(uid, cluster));
        let mac = URL_SAFE_NO_PAD.encode(mac.as_ref());
        Some(format!("{VERSION}:{mac}:{cluster}"))
    }

    /// The cluster `seal` records for the Job `uid`, if jobrelay sealed it
    /// for that Job.
    pub fn open<'a>(&self, uid: &str, seal: &'a str) -> Option<&'a str> {
        let sealing = self.sealing()?;
        let mut parts = seal.splitn(3, ':');
        let (version, mac, cluster) = (parts.next()?, parts.next()?, parts.next()?);
        let mac = URL_SAFE_NO_PAD.decode(mac).ok()?;
        let valid =
            version == VERSION && hmac::verify(&sealing.key, &message(uid, cluster), &mac).is_ok();
        valid.then_some(cluster)
    }
}

/// What is signed: the UID and the cluster, each whole.
fn message(uid: &str, cluster: &str) -> Vec<u8> {
    [uid.as_bytes(), b"\0", cluster.as_bytes()].concat()
}

/// Where a Job runs, as its annotations say it and jobrelay trusts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// No record: not placed.
    Unplaced,
    /// Placed on `cluster` by jobrelay. `claimed`: the plain annotation
    /// says otherwise (`""`: it is missing), and is restored.
    Placed {
        cluster: String,
        claimed: Option<String>,
    },
    /// Placed on `cluster` before records were sealed (the Job is older
    /// than that, its seal missing or made with another key): trusted, and
    /// sealed now.
    Unsealed { cluster: String },
    /// A record jobrelay did not write, naming `claimed`: ignored (the Job
    /// is placed by jobrelay's rules) and removed.
    Forged { claimed: String },
}

/// Judges the record of the Job `uid`, created at `created`, whose
/// annotations hold `annotated` (`jobrelay.dev/cluster`) and `seal`.
pub fn judge(
    sealer: &Sealer,
    uid: &str,
    created: Option<Timestamp>,
    annotated: Option<&str>,
    seal: Option<&str>,
) -> Record {
    if let Some(cluster) = seal.and_then(|seal| sealer.open(uid, seal)) {
        let claimed = match annotated {
            Some(annotated) if annotated == cluster => None,
            other => Some(other.unwrap_or_default().to_string()),
        };
        return Record::Placed {
            cluster: cluster.to_string(),
            claimed,
        };
    }
    let Some(annotated) = annotated else {
        return Record::Unplaced;
    };
    let before_sealing =
        created.is_some_and(|created| sealer.since().is_none_or(|since| created < since));
    match before_sealing {
        true => Record::Unsealed {
            cluster: annotated.to_string(),
        },
        false => Record::Forged {
            claimed: annotated.to_string(),
        },
    }
}

/// Rewrites `object`'s annotations as jobrelay trusts them, for the
/// manager's cache: `jobrelay.dev/cluster` names the cluster of its record,
/// or is gone where it has none, and [`CLAIMED_ANNOTATION`] marks a Job
/// whose record is to be written again (changed, forged, or unsealed).
pub fn for_cache<K: kube::Resource>(object: &mut K, sealer: &Sealer) {
    let meta = object.meta_mut();
    let Some(annotated) = meta.annotations.as_ref() else {
        return;
    };
    let record = judge_object(sealer, meta, annotated.get(CLUSTER_KEY).map(String::as_str));
    let Some(annotations) = meta.annotations.as_mut() else {
        return;
    };
    let claimed = match record {
        Record::Unplaced => None,
        Record::Placed { cluster, claimed } => {
            annotations.insert(CLUSTER_KEY.into(), cluster);
            claimed
        }
        Record::Unsealed { cluster } => Some(cluster),
        Record::Forged { claimed } => {
            annotations.remove(CLUSTER_KEY);
            Some(claimed)
        }
    };
    if let Some(claimed) = claimed {
        annotations.insert(CLAIMED_ANNOTATION.into(), claimed);
    }
}

/// What the cache marked the Job's own annotation as saying, where its
/// record is to be written again ([`for_cache`]).
pub fn claimed<K: kube::Resource>(object: &K) -> Option<&str> {
    object
        .meta()
        .annotations
        .as_ref()?
        .get(CLAIMED_ANNOTATION)
        .map(String::as_str)
}

/// What to write back over a Job's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore<'a> {
    /// What its own annotation says (empty: nothing).
    pub claimed: &'a str,
    /// The cluster its record places it on; `None`: it records none (the
    /// fleet may still hold its mirror somewhere).
    pub placed: Option<String>,
}

/// What to write back over the record of a Job the cache marked, judged
/// again now; `None` when nothing: it was marked before this replica knew
/// the key, and its record is jobrelay's as it stands.
pub fn to_restore<'a, K: kube::Resource>(object: &'a K, sealer: &Sealer) -> Option<Restore<'a>> {
    let claimed = claimed(object)?;
    let placed = match judged_again(object, sealer)? {
        Record::Placed { claimed: None, .. } => return None,
        Record::Placed { cluster, .. } | Record::Unsealed { cluster } => Some(cluster),
        Record::Forged { .. } | Record::Unplaced => None,
    };
    Some(Restore { claimed, placed })
}

/// The record of a Job the cache marked ([`for_cache`]), judged again now:
/// the cache may have judged it before records were sealed. Its own
/// annotation is what the mark kept.
fn judged_again<K: kube::Resource>(object: &K, sealer: &Sealer) -> Option<Record> {
    let claimed = claimed(object)?;
    let annotated = Some(claimed).filter(|claimed| !claimed.is_empty());
    Some(judge_object(sealer, object.meta(), annotated))
}

/// [`judge`] of the object with `meta`, whose own annotation says
/// `annotated`.
fn judge_object(sealer: &Sealer, meta: &ObjectMeta, annotated: Option<&str>) -> Record {
    let seal = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(SEAL_ANNOTATION));
    judge(
        sealer,
        meta.uid.as_deref().unwrap_or_default(),
        meta.creation_timestamp.as_ref().map(|t| t.0),
        annotated,
        seal.map(String::as_str),
    )
}

/// What the Job is told when its record was not jobrelay's, or was
/// changed: `claimed` is what its annotation said (empty: nothing),
/// `placed` the cluster it runs on by jobrelay's record, if any.
pub fn restored_note(claimed: &str, placed: Option<&str>) -> String {
    let said = match claimed {
        "" => "was removed".to_string(),
        claimed => format!("says \"{claimed}\""),
    };
    let then = match placed {
        Some(cluster) => {
            format!("the Job stays on cluster {cluster}, and the annotation is written back")
        }
        None => "the Job is placed by jobrelay's rules, and the annotation is removed".to_string(),
    };
    format!(
        "annotation jobrelay.dev/cluster {said}, which jobrelay did not write: only jobrelay records where a Job runs, so {then}; to choose a cluster, label the Job jobrelay.dev/cluster when creating it (the cluster's rules still apply)"
    )
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
