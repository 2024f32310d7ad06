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

use jobrelay_proto::v1::{
    ApplyMirror, DeleteMirror, DeleteReason, DesiredMirror, DesiredSet, InventoryEntry,
    ManagerMessage, MirrorPhase, RejectReason, manager_message::Kind,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;
use tokio::sync::mpsc;

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

/// The state of one cluster's link, for its WorkerCluster status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    pub connected: bool,
    /// When the last session opened or closed; `None` if none did since start.
    pub since: Option<Timestamp>,
    pub agent_version: String,
    pub last_heard: Option<Timestamp>,
    pub active_mirrors: u32,
}

/// What the manager sent and heard about one mirror on one cluster.
#[derive(Debug, Clone, Default)]
pub struct MirrorView {
    pub key: Option<ObjectRef<Job>>,
    /// The revision the worker reported holding; `None` when it holds none.
    pub held_revision: Option<u64>,
    /// (session, revision) of the last ApplyMirror sent.
    pub apply_sent: Option<(u64, u64)>,
    /// Session in which the last DeleteMirror was sent.
    pub delete_sent: Option<u64>,
    /// Set by MirrorGone: the mirror and its Pods are gone (with the count of
    /// Pods the agent had to delete itself).
    pub gone: Option<u32>,
    pub phase: MirrorPhase,
    /// The copied part of the worker's latest JobStatus.
    pub status: Option<Value>,
    /// The last ApplyRejected, until the worker holds the mirror.
    pub rejected: Option<Rejection>,
    /// Set by MirrorLost: the mirror was removed behind jobrelay's back; the
    /// agent is deleting what is left of it.
    pub lost: Option<LostMirror>,
}

/// A refusal of the worker, as the agent reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub revision: u64,
    pub reason: RejectReason,
    pub message: String,
    /// When the agent tries again (transient reasons only).
    pub retry_in: Option<std::time::Duration>,
}

/// A mirror lost behind jobrelay's back, as the agent reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostMirror {
    /// The lost worker Job's UID; empty when the agent could not tell.
    pub mirror_uid: String,
    pub observed: String,
    /// The manager Job already shows this loss.
    pub accounted: bool,
}

/// What became of a request to have a mirror in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Apply {
    /// ApplyMirror sent now.
    Sent,
    /// Sent before, or the worker already holds this revision.
    InPlace,
    /// The worker refused this revision for good.
    Rejected(Rejection),
    /// The worker refused this revision for a reason that can clear; its
    /// agent tries again by itself.
    Waiting(Rejection),
    /// An earlier deletion of the mirror (or what is left of a lost one) is
    /// not confirmed yet.
    AwaitingGone,
    /// The cluster has no session now.
    Disconnected,
}

/// What became of a request to have a mirror gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleanup {
    /// The agent confirmed the Job and every Pod gone.
    Gone {
        pods_deleted: u32,
    },
    /// DeleteMirror sent now; `first` is false on a resend after reconnect.
    Started {
        first: bool,
    },
    /// Sent in this session; waiting for MirrorGone.
    Waiting,
    Disconnected,
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
                return Apply::AwaitingGone;
            }
            None => {}
        }
        if let Some(rejected) = view.rejected.as_ref().filter(|r| r.revision == revision) {
            return if rejected.reason.is_permanent() {
                Apply::Rejected(rejected.clone())
            } else {
                Apply::Waiting(rejected.clone())
            };
        }
        let Some((session, outbox)) = &state.session else {
            return Apply::Disconnected;
        };
        if view.held_revision.is_some_and(|held| held >= revision)
            || view.apply_sent == Some((*session, revision))
        {
            return Apply::InPlace;
        }
        let apply = ApplyMirror {
            origin_uid: uid.to_string(),
            revision,
            job: job(),
        };
        let _ = outbox.send(message(Kind::ApplyMirror(apply)));
        view.apply_sent = Some((*session, revision));
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
        Cleanup::Started { first }
    }

    /// Drops what is known about a mirror whose manager Job needs it no more.
    pub fn forget(&self, cluster: &str, uid: &str) {
        if let Some(state) = self.lock().get_mut(cluster) {
            state.mirrors.remove(uid);
        }
    }

    /// Records a MirrorStatus; returns the previous phase, or `None` for a
    /// mirror this manager does not want on the cluster (dropped).
    pub fn record_status(
        &self,
        cluster: &str,
        uid: &str,
        revision: u64,
        phase: MirrorPhase,
        status: Option<Value>,
    ) -> Option<MirrorPhase> {
        self.update(cluster, uid, |view| {
            let previous = view.phase;
            view.held_revision = Some(revision);
            view.phase = phase;
            view.rejected = None;
            if status.is_some() {
                view.status = status;
            }
            previous
        })
    }

    /// Records a MirrorGone; `None` for a mirror not wanted here.
    pub fn record_gone(&self, cluster: &str, uid: &str, pods_deleted: u32) -> Option<()> {
        self.update(cluster, uid, |view| {
            view.gone = Some(pods_deleted);
            view.held_revision = None;
            view.phase = MirrorPhase::Unspecified;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet() -> (Fleet, mpsc::UnboundedReceiver<ObjectRef<Job>>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Fleet::new(tx), rx)
    }

    fn key(name: &str) -> ObjectRef<Job> {
        ObjectRef::new(name).within("ns")
    }

    fn kinds(rx: &mut mpsc::UnboundedReceiver<ManagerMessage>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(m) = rx.try_recv() {
            out.push(match m.kind.unwrap() {
                Kind::DesiredSet(d) => format!("desired {}", d.mirrors.len()),
                Kind::ApplyMirror(a) => format!("apply {} r{}", a.origin_uid, a.revision),
                Kind::DeleteMirror(d) => format!("delete {}", d.origin_uid),
                other => format!("{other:?}"),
            });
        }
        out
    }

    #[test]
    fn the_desired_set_goes_first_and_applies_are_sent_once_per_session_and_revision() {
        let (fleet, _) = fleet();
        let (tx, mut rx) = mpsc::unbounded_channel();
        fleet.connect("w1", "test", &[], vec![], tx);
        assert_eq!(
            fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
            Apply::Sent
        );
        assert_eq!(
            fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
            Apply::InPlace
        );
        assert_eq!(
            fleet.ensure_applied("w1", "u1", &key("a"), 2, Vec::new),
            Apply::Sent
        );
        assert_eq!(kinds(&mut rx), ["desired 0", "apply u1 r1", "apply u1 r2"]);

        // A reconnect whose inventory lacks the mirror sends it again.
        let (tx, mut rx) = mpsc::unbounded_channel();
        fleet.connect("w1", "test", &[], vec![], tx);
        assert_eq!(
            fleet.ensure_applied("w1", "u1", &key("a"), 2, Vec::new),
            Apply::Sent
        );
        assert_eq!(kinds(&mut rx), ["desired 0", "apply u1 r2"]);
    }

    #[test]
    fn a_mirror_in_the_inventory_is_not_sent_again() {
        let (fleet, _) = fleet();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let held = InventoryEntry {
            origin_uid: "u1".into(),
            revision: 3,
            ..Default::default()
        };
        let desired = DesiredMirror {
            origin_uid: "u1".into(),
        };
        fleet.connect("w1", "test", &[held], vec![(desired, key("a"))], tx);
        assert_eq!(
            fleet.ensure_applied("w1", "u1", &key("a"), 3, Vec::new),
            Apply::InPlace
        );
        assert_eq!(kinds(&mut rx), ["desired 1"]);
    }

    #[test]
    fn cleanup_waits_for_gone_and_resends_the_delete_in_a_new_session() {
        let (fleet, _) = fleet();
        assert_eq!(
            fleet.cleanup("w1", "u1", &key("a"), DeleteReason::ManagerJobDeleted),
            Cleanup::Disconnected
        );
        let (tx, mut rx) = mpsc::unbounded_channel();
        let s1 = fleet.connect("w1", "test", &[], vec![], tx);
        assert_eq!(
            fleet.cleanup("w1", "u1", &key("a"), DeleteReason::ManagerJobDeleted),
            Cleanup::Started { first: true }
        );
        assert_eq!(
            fleet.cleanup("w1", "u1", &key("a"), DeleteReason::ManagerJobDeleted),
            Cleanup::Waiting
        );
        fleet.disconnect("w1", s1);
        let (tx, mut rx2) = mpsc::unbounded_channel();
        fleet.connect("w1", "test", &[], vec![], tx);
        assert_eq!(
            fleet.cleanup("w1", "u1", &key("a"), DeleteReason::ManagerJobDeleted),
            Cleanup::Started { first: false }
        );
        fleet.record_gone("w1", "u1", 2);
        assert_eq!(
            fleet.cleanup("w1", "u1", &key("a"), DeleteReason::ManagerJobDeleted),
            Cleanup::Gone { pods_deleted: 2 }
        );
        assert_eq!(kinds(&mut rx), ["desired 0", "delete u1"]);
        assert_eq!(kinds(&mut rx2), ["desired 0", "delete u1"]);
    }

    #[test]
    fn a_resumed_job_is_applied_only_after_its_old_mirror_is_gone() {
        let (fleet, _) = fleet();
        let (tx, mut rx) = mpsc::unbounded_channel();
        fleet.connect("w1", "test", &[], vec![], tx);
        fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new);
        fleet.cleanup("w1", "u1", &key("a"), DeleteReason::Suspended);
        assert_eq!(
            fleet.ensure_applied("w1", "u1", &key("a"), 3, Vec::new),
            Apply::AwaitingGone
        );
        fleet.record_gone("w1", "u1", 0);
        assert_eq!(
            fleet.ensure_applied("w1", "u1", &key("a"), 3, Vec::new),
            Apply::Sent
        );
        assert_eq!(
            kinds(&mut rx),
            ["desired 0", "apply u1 r1", "delete u1", "apply u1 r3"]
        );
    }

    #[test]
    fn a_rejected_revision_is_not_resent_and_least_loaded_counts_live_mirrors() {
        let (fleet, mut triggers) = fleet();
        let (tx, _rx) = mpsc::unbounded_channel();
        fleet.connect("w1", "test", &[], vec![], tx);
        let (tx2, _rx2) = mpsc::unbounded_channel();
        fleet.connect("w2", "test", &[], vec![], tx2);
        fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new);
        let conflict = rejection(RejectReason::Conflict);
        fleet.record_rejected("w1", "u1", conflict.clone()).unwrap();
        assert_eq!(triggers.try_recv().unwrap(), key("a"));
        assert_eq!(
            fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
            Apply::Rejected(conflict)
        );
        let counts: Vec<(String, usize)> = fleet
            .candidates()
            .into_iter()
            .map(|c| (c.name, c.active_mirrors))
            .collect();
        assert_eq!(counts, [("w1".to_string(), 1), ("w2".to_string(), 0)]);
    }

    fn rejection(reason: RejectReason) -> Rejection {
        Rejection {
            revision: 1,
            reason,
            message: "no".into(),
            retry_in: None,
        }
    }

    #[test]
    fn a_refusal_that_can_clear_waits_until_the_worker_holds_the_mirror() {
        let (fleet, _) = fleet();
        let (tx, mut rx) = mpsc::unbounded_channel();
        fleet.connect("w1", "test", &[], vec![], tx);
        fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new);
        let quota = rejection(RejectReason::QuotaExceeded);
        fleet.record_rejected("w1", "u1", quota.clone()).unwrap();
        assert_eq!(
            fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
            Apply::Waiting(quota)
        );
        fleet
            .record_status("w1", "u1", 1, MirrorPhase::Pending, None)
            .unwrap();
        assert_eq!(
            fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
            Apply::InPlace,
            "once held, the refusal is history"
        );
        assert_eq!(
            kinds(&mut rx),
            ["desired 0", "apply u1 r1"],
            "never resent by the manager"
        );
    }

    #[test]
    fn a_lost_mirror_is_applied_again_only_once_its_remains_are_gone() {
        let (fleet, _) = fleet();
        let (tx, mut rx) = mpsc::unbounded_channel();
        fleet.connect("w1", "test", &[], vec![], tx);
        fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new);
        fleet
            .record_status(
                "w1",
                "u1",
                1,
                MirrorPhase::Running,
                Some(serde_json::json!({"active": 1})),
            )
            .unwrap();
        fleet.record_lost("w1", "u1", "j1", "deleted").unwrap();
        let view = fleet.view("w1", "u1").unwrap();
        assert_eq!(view.held_revision, None);
        assert!(!view.lost.as_ref().unwrap().accounted);
        fleet.lost_accounted("w1", "u1");
        fleet
            .record_lost("w1", "u1", "j1", "deleted again")
            .unwrap();
        assert!(
            fleet.view("w1", "u1").unwrap().lost.unwrap().accounted,
            "a repeated report of the same loss is the same loss"
        );
        assert_eq!(
            fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
            Apply::AwaitingGone,
            "never two generations live at once"
        );
        fleet.record_gone("w1", "u1", 2).unwrap();
        assert_eq!(
            fleet.ensure_applied("w1", "u1", &key("a"), 1, Vec::new),
            Apply::Sent
        );
        assert!(fleet.view("w1", "u1").unwrap().lost.is_none());
        assert_eq!(kinds(&mut rx), ["desired 0", "apply u1 r1", "apply u1 r1"]);
    }

    #[test]
    fn reports_about_mirrors_never_placed_on_the_cluster_are_dropped() {
        let (fleet, mut triggers) = fleet();
        let (tx, _rx) = mpsc::unbounded_channel();
        let stray = InventoryEntry {
            origin_uid: "elsewhere".into(),
            revision: 1,
            ..Default::default()
        };
        fleet.connect("w1", "test", &[stray], vec![], tx);
        for n in 0..1000 {
            let uid = format!("u{n}");
            assert_eq!(
                fleet.record_status("w1", &uid, 1, MirrorPhase::Running, None),
                None
            );
            assert_eq!(fleet.record_lost("w1", &uid, "j", "gone"), None);
        }
        assert!(fleet.view("w1", "u1").is_none() && fleet.view("w1", "elsewhere").is_none());
        assert!(triggers.try_recv().is_err(), "no reconcile asked for");
        assert_eq!(
            fleet.record_gone("w9", "u1", 0),
            None,
            "nor for an unknown cluster"
        );
    }

    #[test]
    fn jobs_placed_together_spread_and_a_placement_is_stable() {
        let (fleet, _) = fleet();
        assert_eq!(
            fleet.place("u0", &key("z"), None, |_| true),
            None,
            "no cluster connected"
        );
        let mut outboxes = Vec::new();
        for cluster in ["w1", "w2"] {
            let (tx, rx) = mpsc::unbounded_channel();
            outboxes.push(rx);
            fleet.connect(cluster, "test", &[], vec![], tx);
        }
        let placed: Vec<String> = (0..4)
            .map(|i| {
                fleet
                    .place(&format!("u{i}"), &key("a"), None, |_| true)
                    .unwrap()
            })
            .collect();
        assert_eq!(placed, ["w1", "w2", "w1", "w2"]);
        assert_eq!(
            fleet.place("u1", &key("a"), None, |_| true).as_deref(),
            Some("w2")
        );
        assert_eq!(
            fleet
                .place("u9", &key("b"), Some("w7"), |_| true)
                .as_deref(),
            Some("w7")
        );
        assert_eq!(
            fleet
                .place("u5", &key("c"), None, |name| name == "w1")
                .as_deref(),
            Some("w1"),
            "only eligible clusters are candidates"
        );
    }

    #[test]
    fn only_a_disconnected_cluster_can_be_lost_and_a_session_ends_it() {
        let (fleet, _) = fleet();
        let (tx, _rx) = mpsc::unbounded_channel();
        let session = fleet.connect("w1", "0.1.0", &[], vec![], tx);
        assert!(
            !fleet.set_lost("w1", true),
            "a connected cluster is not lost"
        );
        fleet.disconnect("w1", session);
        let link = fleet.link("w1");
        assert!(!link.connected && link.since.is_some() && link.agent_version == "0.1.0");
        assert!(fleet.set_lost("w1", true));
        assert!(fleet.is_lost("w1"));
        let (tx, _rx) = mpsc::unbounded_channel();
        fleet.connect("w1", "0.1.0", &[], vec![], tx);
        assert!(!fleet.is_lost("w1"));
    }
}
