//! What the manager knows about its worker clusters: which are connected
//! (one session each) and, per cluster, what it has sent and heard about each
//! mirror. All of it is rebuilt from the agents' Hello on reconnect; nothing
//! is kept on disk.
//!
//! Every change that a reconcile should react to returns or queues the
//! manager Job's key, which the controller then reconciles.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jobrelay_proto::v1::{
    ApplyMirror, DeleteMirror, DeleteReason, DesiredMirror, DesiredSet, InventoryEntry,
    ManagerMessage, MirrorPhase, manager_message::Kind,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::fleet_views::{Apply, Cleanup, Link, LostMirror, MirrorView, Rejection};
use crate::placement::{Candidate, choose_cluster};

/// The messages queued for one connected agent.
pub type Outbox = mpsc::UnboundedSender<ManagerMessage>;

#[derive(Default)]
struct Cluster {
    session: Option<(u64, Outbox)>,
    mirrors: HashMap<String, MirrorView>,
    /// When the last session opened or closed; `None` before the first.
    since: Option<Timestamp>,
    agent_version: String,
    last_heard: Option<Timestamp>,
    /// Disconnected for longer than its `lostAfter`.
    lost: bool,
}

pub struct Fleet {
    clusters: Mutex<BTreeMap<String, Cluster>>,
    triggers: mpsc::UnboundedSender<ObjectRef<Job>>,
    next_session: AtomicU64,
}

impl Fleet {
    /// A fleet that asks for reconciles through `triggers`.
    pub fn new(triggers: mpsc::UnboundedSender<ObjectRef<Job>>) -> Self {
        Fleet {
            clusters: Mutex::default(),
            triggers,
            next_session: AtomicU64::new(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Cluster>> {
        self.clusters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts a session: takes the agent's inventory as the truth about what
    /// the worker holds, queues the DesiredSet ahead of anything else, and
    /// asks for a reconcile of every mirror of the cluster. Returns the
    /// session id. A previous session of the same cluster is replaced.
    pub fn connect(
        &self,
        cluster: &str,
        agent_version: &str,
        inventory: &[InventoryEntry],
        desired: Vec<(DesiredMirror, ObjectRef<Job>)>,
        outbox: Outbox,
    ) -> u64 {
        let id = self.next_session.fetch_add(1, Ordering::Relaxed);
        let mut clusters = self.lock();
        let state = clusters.entry(cluster.to_string()).or_default();
        for view in state.mirrors.values_mut() {
            view.held_revision = None;
            view.phase = MirrorPhase::Unspecified;
        }
        for (mirror, key) in &desired {
            state
                .mirrors
                .entry(mirror.origin_uid.clone())
                .or_default()
                .key = Some(key.clone());
        }
        // What the agent holds beyond that is for its orphan sweep; nothing
        // is kept for it here.
        for entry in inventory {
            if let Some(view) = state.mirrors.get_mut(&entry.origin_uid) {
                view.held_revision = Some(entry.revision);
                view.phase = entry.phase();
            }
        }
        let mut keys: Vec<ObjectRef<Job>> = Vec::new();
        keys.extend(state.mirrors.values().filter_map(|v| v.key.clone()));
        let mirrors = desired.into_iter().map(|(m, _)| m).collect();
        let _ = outbox.send(message(Kind::DesiredSet(DesiredSet { mirrors })));
        state.session = Some((id, outbox));
        state.since = Some(Timestamp::now());
        state.last_heard = state.since;
        state.agent_version = agent_version.to_string();
        state.lost = false;
        drop(clusters);
        for key in keys {
            let _ = self.triggers.send(key);
        }
        id
    }

    /// Asks for a reconcile of each of `keys`.
    pub fn trigger_all(&self, keys: impl IntoIterator<Item = ObjectRef<Job>>) {
        for key in keys {
            let _ = self.triggers.send(key);
        }
    }

    /// Ends a session, unless a newer one replaced it already.
    pub fn disconnect(&self, cluster: &str, session: u64) {
        let mut clusters = self.lock();
        if let Some(state) = clusters.get_mut(cluster)
            && state.session.as_ref().map(|(id, _)| *id) == Some(session)
        {
            state.session = None;
            state.since = Some(Timestamp::now());
        }
    }

    /// Notes that the agent was heard from just now.
    pub fn heard(&self, cluster: &str) {
        if let Some(state) = self.lock().get_mut(cluster) {
            state.last_heard = Some(Timestamp::now());
        }
    }

    /// The state of a cluster's link.
    pub fn link(&self, cluster: &str) -> Link {
        self.lock()
            .get(cluster)
            .map_or_else(Link::default, |c| Link {
                connected: c.session.is_some(),
                since: c.since,
                agent_version: c.agent_version.clone(),
                last_heard: c.last_heard,
                active_mirrors: held(c),
            })
    }

    /// Marks a disconnected cluster Lost (or not); says whether that changed.
    pub fn set_lost(&self, cluster: &str, lost: bool) -> bool {
        let mut clusters = self.lock();
        let state = clusters.entry(cluster.to_string()).or_default();
        let lost = lost && state.session.is_none();
        std::mem::replace(&mut state.lost, lost) != lost
    }

    pub fn is_lost(&self, cluster: &str) -> bool {
        self.lock().get(cluster).is_some_and(|c| c.lost)
    }

    pub fn is_connected(&self, cluster: &str) -> bool {
        self.lock()
            .get(cluster)
            .is_some_and(|c| c.session.is_some())
    }

    /// Chooses the cluster for a Job that has none yet — the pinned one, else
    /// the connected cluster with the fewest mirrors among those `eligible`
    /// says may take it — and counts the Job there at once, so Jobs created
    /// together spread. Asked again for the same Job, it gives the same answer.
    pub fn place(
        &self,
        uid: &str,
        key: &ObjectRef<Job>,
        pinned: Option<&str>,
        eligible: impl Fn(&str) -> bool,
    ) -> Option<String> {
        let mut clusters = self.lock();
        if let Some((name, _)) = clusters.iter().find(|(_, c)| c.mirrors.contains_key(uid)) {
            return Some(name.clone());
        }
        let mut candidates = candidates(&clusters);
        candidates.retain(|c| eligible(&c.name));
        let choice = choose_cluster(pinned, &candidates)?;
        let view = clusters
            .entry(choice.clone())
            .or_default()
            .mirrors
            .entry(uid.to_string())
            .or_default();
        view.key = Some(key.clone());
        Some(choice)
    }

    /// Connected clusters with the number of mirrors each holds or is being sent.
    pub fn candidates(&self) -> Vec<Candidate> {
        candidates(&self.lock())
    }
    pub fn view(&self, cluster: &str, uid: &str) -> Option<MirrorView> {
        self.lock().get(cluster)?.mirrors.get(uid).cloned()
    }

    /// What is true of `revision` of the mirror on `cluster` without sending
    /// anything: `None` when an ApplyMirror is due (then [`Fleet::ensure_applied`]
    /// sends it).
    pub fn apply_needed(
        &self,
        cluster: &str,
        uid: &str,
        key: &ObjectRef<Job>,
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
        key: &ObjectRef<Job>,
        revision: u64,
        job: impl FnOnce() -> Vec<u8>,
    ) -> Apply {
        let mut clusters = self.lock();
        let state = clusters.entry(cluster.to_string()).or_default();
        if let Some(outcome) = applied_already(state, uid, key, revision) {
            return outcome;
        }
        let (Some((session, outbox)), Some(view)) = (&state.session, state.mirrors.get_mut(uid))
        else {
            return Apply::Disconnected;
        };
        let apply = ApplyMirror {
            origin_uid: uid.to_string(),
            revision,
            job: job(),
        };
        let _ = outbox.send(message(Kind::ApplyMirror(apply)));
        view.apply_sent = Some((*session, revision));
        view.awaiting_held_since.get_or_insert_with(Instant::now);
        Apply::Sent
    }

    /// Makes sure the mirror is being deleted, and tells whether it is gone.
    pub fn cleanup(
        &self,
        cluster: &str,
        uid: &str,
        key: &ObjectRef<Job>,
        reason: DeleteReason,
    ) -> Cleanup {
        let mut clusters = self.lock();
        let state = clusters.entry(cluster.to_string()).or_default();
        let view = state.mirrors.entry(uid.to_string()).or_default();
        view.key = Some(key.clone());
        if let Some(pods_deleted) = view.gone {
            return Cleanup::Gone { pods_deleted };
        }
        let Some((session, outbox)) = &state.session else {
            return Cleanup::Disconnected;
        };
        if view.delete_sent == Some(*session) {
            return Cleanup::Waiting;
        }
        let first = view.delete_sent.is_none();
        let delete = DeleteMirror {
            origin_uid: uid.to_string(),
            namespace: key.namespace.clone().unwrap_or_default(),
            name: key.name.clone(),
            reason: reason as i32,
        };
        let _ = outbox.send(message(Kind::DeleteMirror(delete)));
        view.delete_sent = Some(*session);
        view.delete_sent_at.get_or_insert_with(Instant::now);
        Cleanup::Started { first }
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
        status: Option<Value>,
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
        if let Some(lost) = self
            .lock()
            .get_mut(cluster)
            .and_then(|c| c.mirrors.get_mut(uid))
            .and_then(|v| v.lost.as_mut())
        {
            lost.accounted = true;
        }
    }

    /// The manager Job a mirror belongs to, if known.
    pub fn key_of(&self, cluster: &str, uid: &str) -> Option<ObjectRef<Job>> {
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
        let view = clusters
            .get_mut(cluster)?
            .mirrors
            .get_mut(uid)
            .filter(|v| v.key.is_some())?;
        let result = change(view);
        let key = view.key.clone();
        drop(clusters);
        if let Some(key) = key {
            let _ = self.triggers.send(key);
        }
        Some(result)
    }
}

impl Fleet {
    /// Mirrors the manager wants, by cluster and last reported phase.
    pub fn mirrors_by_phase(&self) -> BTreeMap<(String, MirrorPhase), u64> {
        let mut counts = BTreeMap::new();
        for (name, cluster) in self.lock().iter() {
            for view in cluster.mirrors.values().filter(|v| v.key.is_some()) {
                *counts.entry((name.clone(), view.phase)).or_default() += 1;
            }
        }
        counts
    }
}

fn held(cluster: &Cluster) -> u32 {
    cluster
        .mirrors
        .values()
        .filter(|v| v.held_revision.is_some())
        .count() as u32
}

fn candidates(clusters: &BTreeMap<String, Cluster>) -> Vec<Candidate> {
    clusters
        .iter()
        .filter(|(_, c)| c.session.is_some())
        .map(|(name, c)| Candidate {
            name: name.clone(),
            active_mirrors: c
                .mirrors
                .values()
                .filter(|v| v.gone.is_none() && v.key.is_some())
                .count(),
        })
        .collect()
}

pub fn message(kind: Kind) -> ManagerMessage {
    ManagerMessage { kind: Some(kind) }
}

/// The answer for `revision` of the mirror of `uid` that needs no send, or
/// `None` when an ApplyMirror is due. Records the mirror's key, and starts a
/// new view if the last mirror was deleted.
fn applied_already(
    state: &mut Cluster,
    uid: &str,
    key: &ObjectRef<Job>,
    revision: u64,
) -> Option<Apply> {
    let view = state.mirrors.entry(uid.to_string()).or_default();
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
    let Some((session, _)) = &state.session else {
        return Some(Apply::Disconnected);
    };
    let in_place = view.held_revision.is_some_and(|held| held >= revision)
        || view.apply_sent == Some((*session, revision));
    in_place.then_some(Apply::InPlace)
}

#[cfg(test)]
#[path = "fleet_tests.rs"]
pub(crate) mod tests;
