//! The fleet's bookkeeping of each mirror: what was sent to its cluster
//! (applies, deletions) and what its agent reported (held revision, status,
//! refusal, loss, gone).

use std::time::{Duration, Instant};

use jobrelay_proto::v1::{
    ApplyMirror, DeleteMirror, DeleteReason, MirrorPhase, manager_message::Kind,
};

use super::{Cluster, Fleet, message};
use crate::job::status::StatusText;
use crate::job::views::{Apply, Cleanup, LostMirror, MirrorView, Rejection};
use crate::kinds::key::Key;
use jobrelay_proto::kinds::KindName;

impl Fleet {
    pub fn view(&self, cluster: &str, uid: &str) -> Option<MirrorView> {
        self.lock().get(cluster)?.mirrors.get(uid).cloned()
    }

    /// The phase the worker last reported for the mirror (no copy of the
    /// rest of its view).
    pub fn phase(&self, cluster: &str, uid: &str) -> Option<MirrorPhase> {
        Some(self.lock().get(cluster)?.mirrors.get(uid)?.phase)
    }

    /// What is true of `revision` of the mirror on `cluster` without sending
    /// anything: `None` when an ApplyMirror is due (then [`Fleet::ensure_applied`]
    /// sends it).
    pub fn apply_needed(
        &self,
        cluster: &str,
        uid: &str,
        key: &Key,
        revision: u64,
    ) -> Option<Apply> {
        let mut clusters = self.lock();
        let state = clusters.entry(cluster.to_string()).or_default();
        applied_already(state, uid, key, revision)
    }

    /// Makes sure the cluster holds `revision` of the mirror, sending it if needed.
    pub fn ensure_applied(
        &self,
        cluster: &str,
        uid: &str,
        key: &Key,
        revision: u64,
        job: impl FnOnce() -> Vec<u8>,
    ) -> Apply {
        let mut clusters = self.lock();
        let state = clusters.entry(cluster.to_string()).or_default();
        if let Some(outcome) = applied_already(state, uid, key, revision) {
            return outcome;
        }
        let Some((session, outbox)) = &state.session else {
            return Apply::Disconnected;
        };
        state
            .mirrors
            .change_existing(uid, |view| {
                let apply = ApplyMirror {
                    origin_uid: uid.to_string(),
                    revision,
                    object: job(),
                    kind: Some(key.kind.to_wire()),
                };
                let _ = outbox.send(message(Kind::ApplyMirror(apply)));
                view.apply_sent = Some((*session, revision));
                view.awaiting_held_since.get_or_insert_with(Instant::now);
                Apply::Sent
            })
            .unwrap_or(Apply::Disconnected)
    }

    /// Makes sure the mirror is being deleted, and tells whether it is gone.
    pub fn cleanup(&self, cluster: &str, uid: &str, key: &Key, reason: DeleteReason) -> Cleanup {
        let mut clusters = self.lock();
        let state = clusters.entry(cluster.to_string()).or_default();
        let session = &state.session;
        state.mirrors.change(uid, |view| {
            view.key = Some(key.clone());
            if let Some(pods_deleted) = view.gone {
                return Cleanup::Gone { pods_deleted };
            }
            let Some((session, outbox)) = session else {
                return Cleanup::Disconnected;
            };
            if view.delete_sent == Some(*session) {
                return Cleanup::Waiting;
            }
            let first = view.delete_sent.is_none();
            let delete = DeleteMirror {
                origin_uid: uid.to_string(),
                namespace: key.namespace.clone(),
                name: key.name.clone(),
                reason: reason as i32,
                kind: Some(key.kind.to_wire()),
            };
            let _ = outbox.send(message(Kind::DeleteMirror(delete)));
            view.delete_sent = Some(*session);
            view.delete_sent_at.get_or_insert_with(Instant::now);
            Cleanup::Started { first }
        })
    }

    /// Drops what is known about a mirror whose manager Job needs it no more.
    pub fn forget(&self, cluster: &str, uid: &str) {
        if let Some(state) = self.lock().get_mut(cluster) {
            state.mirrors.remove(uid);
        }
    }

    /// Records a MirrorStatus; returns the previous phase and, for the first
    /// report after an apply, how long the worker took to hold the mirror.
    /// `None` for a mirror this manager does not want on the cluster
    /// (dropped).
    pub fn record_status(
        &self,
        cluster: &str,
        uid: &str,
        revision: u64,
        phase: MirrorPhase,
        status: Option<StatusText>,
    ) -> Option<(MirrorPhase, Option<Duration>)> {
        self.update(cluster, uid, |view| {
            let previous = (
                view.phase,
                view.awaiting_held_since.take().map(|at| at.elapsed()),
            );
            view.held_revision = Some(revision);
            view.phase = phase;
            view.rejected = None;
            if status.is_some() {
                view.status = status;
            }
            previous
        })
    }

    /// Records a MirrorGone; returns how long since the first DeleteMirror,
    /// if one was sent. `None` for a mirror not wanted here.
    pub fn record_gone(
        &self,
        cluster: &str,
        uid: &str,
        pods_deleted: u32,
    ) -> Option<Option<Duration>> {
        self.update(cluster, uid, |view| {
            view.gone = Some(pods_deleted);
            view.awaiting_held_since = None;
            view.held_revision = None;
            view.phase = MirrorPhase::Unspecified;
            view.delete_sent_at.take().map(|at| at.elapsed())
        })
    }

    /// Records an ApplyRejected; `None` for a mirror not wanted here.
    pub fn record_rejected(&self, cluster: &str, uid: &str, rejection: Rejection) -> Option<()> {
        self.update(cluster, uid, |view| view.rejected = Some(rejection))
    }

    /// Records a MirrorLost (a repeat of the same loss changes nothing);
    /// `None` for a mirror not wanted here.
    pub fn record_lost(
        &self,
        cluster: &str,
        uid: &str,
        mirror_uid: &str,
        observed: &str,
    ) -> Option<()> {
        self.update(cluster, uid, |view| {
            if view.gone.is_some() {
                // Already confirmed gone; nothing is left to wait for.
                return;
            }
            if let Some(lost) = &view.lost
                && lost.mirror_uid == mirror_uid
            {
                return;
            }
            view.lost = Some(LostMirror {
                mirror_uid: mirror_uid.to_string(),
                observed: observed.to_string(),
                accounted: false,
            });
            view.held_revision = None;
            view.phase = MirrorPhase::Deleting;
        })
    }

    /// Notes that the manager Job shows the mirror's loss.
    pub fn lost_accounted(&self, cluster: &str, uid: &str) {
        if let Some(state) = self.lock().get_mut(cluster) {
            state.mirrors.change_existing(uid, |view| {
                if let Some(lost) = view.lost.as_mut() {
                    lost.accounted = true;
                }
            });
        }
    }

    /// Whether the mirror of `uid` is one this manager placed on `cluster`:
    /// only then is a report about it read.
    pub fn owns(&self, cluster: &str, uid: &str) -> bool {
        self.kind_of(cluster, uid).is_some()
    }

    /// The kind of the mirror of `uid`, if this manager placed it on
    /// `cluster`.
    pub fn kind_of(&self, cluster: &str, uid: &str) -> Option<KindName> {
        let clusters = self.lock();
        let view = clusters.get(cluster)?.mirrors.get(uid)?;
        view.key.as_ref().map(|key| key.kind)
    }

    /// The manager Job a mirror belongs to, if known.
    pub fn key_of(&self, cluster: &str, uid: &str) -> Option<Key> {
        self.lock().get(cluster)?.mirrors.get(uid)?.key.clone()
    }

    /// Changes what is known of a mirror this manager wants on the cluster
    /// and asks for its Job's reconcile; a report about any other origin UID
    /// changes nothing (`None`), so a peer cannot make the manager hold
    /// memory for uids it never placed there.
    fn update<T>(
        &self,
        cluster: &str,
        uid: &str,
        change: impl FnOnce(&mut MirrorView) -> T,
    ) -> Option<T> {
        let mut clusters = self.lock();
        let (result, key) = clusters
            .get_mut(cluster)?
            .mirrors
            .change_existing(uid, |view| {
                view.key.is_some().then(|| (change(view), view.key.clone()))
            })
            .flatten()?;
        drop(clusters);
        if let Some(key) = key {
            let _ = self.triggers.send(key);
        }
        Some(result)
    }
}

/// The answer for `revision` of the mirror of `uid` that needs no send, or
/// `None` when an ApplyMirror is due. Records the mirror's key, and starts a
/// new view if the last mirror was deleted.
fn applied_already(state: &mut Cluster, uid: &str, key: &Key, revision: u64) -> Option<Apply> {
    let session = &state.session;
    state.mirrors.change(uid, |view| {
        view.key = Some(key.clone());
        match view.gone {
            Some(_) => {
                // Deleted before (suspension); this is a new mirror.
                *view = MirrorView {
                    key: Some(key.clone()),
                    ..Default::default()
                };
            }
            None if view.delete_sent.is_some() || view.lost.is_some() => {
                return Some(Apply::AwaitingGone);
            }
            None => {}
        }
        if let Some(rejected) = view.rejected.as_ref().filter(|r| r.revision == revision) {
            return Some(if rejected.reason.is_permanent() {
                Apply::Rejected(rejected.clone())
            } else {
                Apply::Waiting(rejected.clone())
            });
        }
        let Some((session, _)) = session else {
            return Some(Apply::Disconnected);
        };
        let in_place = view.held_revision.is_some_and(|held| held >= revision)
            || view.apply_sent == Some((*session, revision));
        in_place.then_some(Apply::InPlace)
    })
}
