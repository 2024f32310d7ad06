//! Noticing, on every pass the watches trigger, desired mirrors that were
//! removed behind jobrelay's back and Pods their live mirror does not own
//! (the judgement itself is [`crate::lost::judge`]), one mirror's record at
//! a time.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::deletion::delete_object;
use super::mirror::{Lost, Record};
use super::{Looking, Mirrors, Snapshot, Visit, concurrently};
use crate::kinds::{self, Mirror};
use crate::lost::{JobSeen, LossVerdict, PodSeen, judge};
use crate::teardown::Deleted;

impl Mirrors {
    /// Judges every desired mirror the agent is not deleting itself: a lost
    /// one is deleted Pods-first and reported; stray Pods that outlived the
    /// orphan grace are returned, for [`Mirrors::delete_strays`].
    pub(super) fn notice_losses(&mut self, snapshot: &Snapshot) -> Vec<(String, Arc<Pod>)> {
        let Some(desired) = self.desired.uids() else {
            return Vec::new();
        };
        let looking = Looking {
            snapshot,
            now: Instant::now(),
            grace: self.orphan_pod_grace,
            deletions: &self.deletions,
        };
        let mut lost = Vec::new();
        let mut due = Vec::new();
        // Strays of the mirrors looked at are judged again (since when they
        // were first seen kept); others keep theirs.
        let mut before = self.records.take_strays(match &snapshot.visit {
            Visit::Everything => None,
            Visit::These(uids) => Some(uids),
        });
        for uid in snapshot.visited(desired.iter(), |uid| desired.contains(uid)) {
            if self.records.is_deleting(&uid) {
                continue;
            }
            let known = before.remove(&uid).unwrap_or_default();
            match self
                .records
                .update(&uid, |record| notice(record, &uid, known, &looking))
            {
                Noticed::Due(pods) => due.extend(pods),
                Noticed::Lost(loss) => lost.push((uid, loss)),
            }
        }
        for (uid, loss) in lost {
            let Loss {
                namespace,
                name,
                mirror_uid,
                observed,
            } = loss;
            warn!(%uid, %namespace, %name, mirror_uid = mirror_uid.as_deref().unwrap_or(""), %observed, "mirror lost behind jobrelay's back; deleting what is left of it");
            let lost = Lost {
                mirror_uid,
                observed,
                reported: false,
            };
            self.begin_lost(uid, namespace, name, lost);
        }
        due
    }

    /// Deletes the stray Pods [`Mirrors::notice_losses`] found due.
    pub(super) async fn delete_strays(&self, due: Vec<(String, Arc<Pod>)>) {
        let client = &self.client;
        concurrently(due.into_iter().map(|(uid, pod)| async move {
            if delete_object::<Pod>(client, pod.meta()).await == Deleted::Now {
                info!(%uid, pod = %pod.name_any(), "Pod not owned by its live mirror outlived the grace; deleted");
            }
        }))
        .await;
    }
}

/// What judging a mirror found.
enum Noticed {
    /// Stray Pods due for deletion, if any.
    Due(Vec<(String, Arc<Pod>)>),
    Lost(Loss),
}

/// A mirror lost behind jobrelay's back: where what is left of it is, and
/// what the manager is told.
struct Loss {
    namespace: String,
    name: String,
    mirror_uid: Option<String>,
    observed: String,
}

/// Judges one desired mirror by what the caches show of it, keeping in its
/// record the live mirror Job seen and the Pods it does not own (since when
/// `known` says, or from now).
fn notice(
    record: &mut Record,
    uid: &str,
    known: HashMap<String, Instant>,
    looking: &Looking,
) -> Noticed {
    let Looking { snapshot, now, .. } = *looking;
    let jobs = snapshot.mirrors(uid);
    let pods = snapshot.pods(uid);
    let jobs_seen: Vec<JobSeen> = jobs
        .iter()
        .map(|j| JobSeen {
            uid: j.object_meta().uid.clone().unwrap_or_default(),
            deleting: j.object_meta().deletion_timestamp.is_some(),
        })
        .collect();
    let parents = parents(snapshot.objects(uid));
    let pods_seen: Vec<PodSeen> = pods.iter().map(|p| pod_seen(p, &parents)).collect();
    let mut due = Vec::new();
    match judge(&jobs_seen, &pods_seen, record.seen_mirror.as_deref()) {
        LossVerdict::Intact { live } => {
            if let Some(live) = live {
                record.seen_mirror = Some(live);
            }
        }
        LossVerdict::Strays { live, pods: stray } => {
            record.seen_mirror = Some(live);
            for pod in pods.iter().filter(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && stray.contains(&p.uid().unwrap_or_default())
            }) {
                let pod_uid = pod.uid().unwrap_or_default();
                let since = *known.get(&pod_uid).unwrap_or(&now);
                record.strays.insert(pod_uid, since);
                if now - since >= looking.grace && looking.deletions.try_take_n(1) {
                    due.push((uid.to_string(), Arc::clone(pod)));
                }
            }
        }
        LossVerdict::Lost {
            mirror_uid,
            observed,
        } => {
            let (namespace, name) = jobs
                .first()
                .map(|j| {
                    let meta = j.object_meta();
                    let namespace = meta.namespace.clone().unwrap_or_default();
                    (namespace, meta.name.clone().unwrap_or_default())
                })
                .or_else(|| {
                    pods.first()
                        .map(|p| (p.namespace().unwrap_or_default(), String::new()))
                })
                .unwrap_or_default();
            record.seen_mirror = None;
            return Noticed::Lost(Loss {
                namespace,
                name,
                mirror_uid,
                observed,
            });
        }
    }
    Noticed::Due(due)
}

/// The mirror each child object (a JobSet's Job) belongs to, by the
/// child's UID.
fn parents(objects: &[Arc<dyn Mirror>]) -> HashMap<&str, &str> {
    objects
        .iter()
        .filter_map(|o| {
            let meta = o.object_meta();
            Some((meta.uid.as_deref()?, kinds::parent(meta)?))
        })
        .collect()
}

/// A Pod as the judgement sees it: owned by the mirror whose Job controls
/// it — that Job itself, or the mirror the Job is a child of.
fn pod_seen(pod: &Pod, parents: &HashMap<&str, &str>) -> PodSeen {
    let job = pod
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "Job")
        .map(|o| o.uid.as_str());
    PodSeen {
        uid: pod.uid().unwrap_or_default(),
        owner: job.map(|job| parents.get(job).copied().unwrap_or(job).to_string()),
        deleting: pod.metadata.deletion_timestamp.is_some(),
    }
}
