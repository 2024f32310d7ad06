//! What the manager knows about its worker clusters: which are connected
//! (one session each) and, per cluster, what it has sent and heard about each
//! mirror. All of it is rebuilt from the agents' Hello on reconnect; nothing
//! is kept on disk. This file holds the clusters (sessions, links, loss,
//! placement); `mirrors.rs` the bookkeeping of each mirror.
//!
//! Every change that a reconcile should react to returns or queues the
//! manager Job's key, which the controller then reconciles.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use jobrelay_proto::v1::{
    DesiredMirror, DesiredSet, InventoryEntry, ManagerMessage, MirrorPhase, ObjectKind,
    manager_message::Kind,
};
use k8s_openapi::jiff::Timestamp;
use tokio::sync::mpsc;

use crate::job::placement::Candidate;
use crate::kinds::Key;
use crate::kinds::demands::Demands;
use crate::mirror::Event;
use inventory::Inventory;
use jobrelay_kinds::room::Room;
use jobrelay_proto::kinds::{self, KindName};
use ledger::Ledger;
use mirrors::MirrorMap;

pub use crate::outbox::Outbox;

/// The state of one cluster's link, for its WorkerCluster status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    pub connected: bool,
    /// When the last session opened or closed; `None` if none did since start.
    pub since: Option<Timestamp>,
    pub agent_version: String,
    pub last_heard: Option<Timestamp>,
    pub active_mirrors: u32,
    /// The room its agent last reported, if it reports any.
    pub room: Option<Room>,
    /// Why the manager cut the last session, if a limit did.
    pub cut: Option<String>,
}

#[derive(Default)]
struct Cluster {
    session: Option<(u64, Outbox)>,
    mirrors: MirrorMap,
    /// When the last session opened or closed; `None` before the first.
    since: Option<Timestamp>,
    agent_version: String,
    last_heard: Option<Timestamp>,
    /// Disconnected for longer than its `lostAfter`.
    lost: bool,
    /// Why the manager cut the last session, if a limit did.
    cut: Option<String>,
    /// When a session was last cut over its budget.
    over_budget_at: Option<std::time::Instant>,
    /// The kinds its agent mirrors, as its last Hello named them.
    kinds: Vec<ObjectKind>,
    /// Its room: what the agent reported, less what is promised.
    room: Ledger,
}

pub struct Fleet {
    clusters: Mutex<BTreeMap<String, Cluster>>,
    /// What relayed objects' Pods ask, and which wait for room.
    demands: Arc<Demands>,
    triggers: mpsc::UnboundedSender<Key>,
    next_session: AtomicU64,
}

impl Fleet {
    /// A fleet that asks for reconciles through `triggers`.
    pub fn new(triggers: mpsc::UnboundedSender<Key>) -> Self {
        Fleet {
            clusters: Mutex::default(),
            demands: Arc::default(),
            triggers,
            next_session: AtomicU64::new(1),
        }
    }

    /// What relayed objects' Pods ask: the watches record it.
    pub fn demands(&self) -> Arc<Demands> {
        Arc::clone(&self.demands)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Cluster>> {
        self.clusters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts a session: takes the agent's inventory as the truth about what
    /// the worker holds, queues the DesiredSet (with what of the inventory is
    /// `released`, and whether the cluster was Lost) ahead of anything else, and
    /// asks for a reconcile of every mirror of the cluster. Returns the
    /// session id. A previous session of the same cluster is replaced.
    pub fn connect(
        &self,
        cluster: &str,
        agent_version: &str,
        inventory: &[InventoryEntry],
        desired: Vec<(DesiredMirror, Key)>,
        released: Vec<String>,
        outbox: Outbox,
    ) -> u64 {
        let id = self.next_session.fetch_add(1, Ordering::Relaxed);
        let mut clusters = self.lock();
        let state = clusters.entry(cluster.to_string()).or_default();
        for (mirror, key) in &desired {
            state.mirrors.change(&mirror.origin_uid, key, |_| ());
        }
        // What the agent holds beyond the mirrors known here is for its
        // orphan sweep; nothing is kept for it here.
        let inventory = Inventory::new(inventory);
        state.mirrors.change_all(|uid, mirror| {
            let held = inventory.held(uid, &mirror.key.namespace);
            mirrors::take_in(mirror, Event::Reconnected { held });
        });
        let mut keys: Vec<Key> = Vec::new();
        keys.extend(state.mirrors.values().map(|m| m.key.clone()));
        let mirrors = desired.into_iter().map(|(m, _)| m).collect();
        // A cluster back from Lost had its mirrors released while away.
        let after_lost = state.lost;
        let _ = outbox.send(message(Kind::DesiredSet(DesiredSet {
            mirrors,
            released,
            after_lost,
        })));
        state.session = Some((id, outbox));
        state.since = Some(Timestamp::now());
        state.last_heard = state.since;
        state.agent_version = agent_version.to_string();
        state.lost = false;
        state.cut = None;
        drop(clusters);
        for key in keys {
            let _ = self.triggers.send(key);
        }
        id
    }

    /// Asks for a reconcile of each of `keys`.
    pub fn trigger_all(&self, keys: impl IntoIterator<Item = Key>) {
        for key in keys {
            let _ = self.triggers.send(key);
        }
    }

    /// Ends a session the manager cut for `why` (a limit it broke;
    /// `over_budget`: its rates), unless a newer one replaced it already:
    /// the WorkerCluster says why.
    pub fn cut(&self, cluster: &str, session: u64, why: String, over_budget: bool) {
        let mut clusters = self.lock();
        if let Some(state) = clusters.get_mut(cluster) {
            if over_budget {
                state.over_budget_at = Some(std::time::Instant::now());
            }
            if state.session.as_ref().map(|(id, _)| *id) == Some(session) {
                state.cut = Some(why);
            }
        }
        drop(clusters);
        self.disconnect(cluster, session);
    }

    /// When a session of `cluster` was last cut over its budget.
    pub fn over_budget_at(&self, cluster: &str) -> Option<std::time::Instant> {
        self.lock().get(cluster)?.over_budget_at
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

    /// The open session of `cluster`'s agent, and its outbox.
    pub fn session_of(&self, cluster: &str) -> Option<(u64, Outbox)> {
        self.lock().get(cluster)?.session.clone()
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
                room: c.room.reported().cloned(),
                cut: c.cut.clone(),
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

    /// Whether the agent of `cluster` mirrors `kind`, as its last Hello said.
    pub fn takes(&self, cluster: &str, kind: KindName) -> bool {
        let clusters = self.lock();
        let kinds = clusters.get(cluster).map(|c| c.kinds.as_slice());
        kinds::mirrors(kinds.unwrap_or_default(), kind)
    }

    /// Records the kinds the agent of `cluster` mirrors (its Hello's).
    pub fn set_kinds(&self, cluster: &str, kinds: &[ObjectKind]) {
        let mut clusters = self.lock();
        clusters.entry(cluster.to_string()).or_default().kinds = kinds.to_vec();
    }

    /// Connected clusters with the number of mirrors each holds or is being sent.
    pub fn candidates(&self) -> Vec<Candidate> {
        candidates(&self.lock())
    }
}

impl Fleet {
    /// Mirrors the manager wants, by cluster and last reported phase.
    pub fn mirrors_by_phase(&self) -> BTreeMap<(String, MirrorPhase), u64> {
        let mut counts = BTreeMap::new();
        for (name, cluster) in self.lock().iter() {
            for mirror in cluster.mirrors.values() {
                *counts
                    .entry((name.clone(), mirror.state.phase()))
                    .or_default() += 1;
            }
        }
        counts
    }
}

fn held(cluster: &Cluster) -> u32 {
    u32::try_from(cluster.mirrors.held()).unwrap_or(u32::MAX)
}

fn candidates(clusters: &BTreeMap<String, Cluster>) -> Vec<Candidate> {
    clusters
        .iter()
        .filter(|(_, c)| c.session.is_some())
        .map(|(name, c)| Candidate {
            name: name.clone(),
            active_mirrors: c.mirrors.active(),
        })
        .collect()
}

pub fn message(kind: Kind) -> ManagerMessage {
    ManagerMessage { kind: Some(kind) }
}

mod inventory;
mod ledger;
mod mirrors;
mod resync;
mod room;

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod count_tests;

#[cfg(test)]
mod placement_tests;
