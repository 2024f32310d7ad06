//! The fleet as the store of each mirror's [`State`]: every request and
//! every report is decided by [`transition`] — by name of its arm
//! (`mirror::apply`, `cleanup`, `reported`, `gone`) where the caller needs
//! that event's typed answer — and what it says to send goes into the
//! cluster's outbox here.
//!
//! Each cluster's mirrors are a [`MirrorMap`], which keeps the counts
//! placement and the cluster's status read as the mirrors change: every
//! change goes through it, so a count cannot drift from the states, and
//! placing a wave of new Jobs costs one count per cluster rather than a pass
//! over every mirror.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::{Duration, Instant};

use jobrelay_proto::kinds::KindName;
use jobrelay_proto::v1::{
    ApplyMirror, DeleteMirror, DeleteReason, MirrorPhase, manager_message::Kind,
};

use super::{Fleet, message};
use crate::kinds::Key;
use crate::mirror::{
    self, Apply, Cleanup, Event, Held, HeldPod, Mirror, Rejection, Send, State, Transition,
    transition,
};

/// Takes what `decide` makes of `mirror`'s state; returns what to send and
/// the answer.
fn step<A>(mirror: &mut Mirror, decide: impl FnOnce(State) -> Transition<A>) -> (Option<Send>, A) {
    let state = std::mem::replace(&mut mirror.state, State::Unsent);
    let next = decide(state);
    mirror.state = next.state;
    (next.send, next.outcome)
}

/// Takes `event` into `mirror`'s state.
pub(super) fn take_in(mirror: &mut Mirror, event: Event) {
    step(mirror, |state| transition(state, event));
}

impl Fleet {
    /// The mirror of `uid` on `cluster`, as the fleet knows it.
    pub fn view(&self, cluster: &str, uid: &str) -> Option<Mirror> {
        self.lock().get(cluster)?.mirrors.get(uid).cloned()
    }

    /// The cluster where the fleet wants a mirror of `uid` in place (placed
    /// there, not being deleted, lost or gone), if one.
    pub fn wanted_on(&self, uid: &str) -> Option<String> {
        self.lock().iter().find_map(|(cluster, state)| {
            let mirror = state.mirrors.get(uid)?;
            mirror.state.wanted().then(|| cluster.clone())
        })
    }

    /// The cluster whose worker holds a mirror of `uid`, as its agent last
    /// showed it, and not told to delete it — the one the mirror is wanted
    /// on first, then any that keeps one (a finished Job's, retained).
    pub fn holding(&self, uid: &str) -> Option<String> {
        let clusters = self.lock();
        let held = clusters.iter().filter_map(|(cluster, state)| {
            let mirror = state.mirrors.get(uid)?;
            let deleting = matches!(mirror.state, State::Deleting { .. });
            (mirror.state.held().is_some() && !deleting)
                .then(|| (mirror.state.wanted(), cluster.clone()))
        });
        held.max_by_key(|(wanted, _)| *wanted)
            .map(|(_, cluster)| cluster)
    }

    /// The phase the worker last reported for the mirror (no copy of the
    /// rest of its state).
    pub fn phase(&self, cluster: &str, uid: &str) -> Option<MirrorPhase> {
        Some(self.lock().get(cluster)?.mirrors.get(uid)?.state.phase())
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
        let session = state.session.as_ref().map(|(id, _)| *id);
        state.mirrors.change(uid, key, |current| {
            let next = mirror::apply(current.state.clone(), revision, session, Instant::now());
            if next.send.is_some() {
                return None;
            }
            current.state = next.state;
            Some(next.outcome)
        })
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
        let session = &state.session;
        let id = session.as_ref().map(|(id, _)| *id);
        state.mirrors.change(uid, key, |current| {
            let (send, outcome) = step(current, |state| {
                mirror::apply(state, revision, id, Instant::now())
            });
            if let (Some(Send::ApplyMirror { revision }), Some((_, outbox))) = (send, session) {
                let apply = ApplyMirror {
                    origin_uid: uid.to_string(),
                    revision,
                    object: job(),
                    kind: Some(key.kind.to_wire()),
                };
                let _ = outbox.send(message(Kind::ApplyMirror(apply)));
            }
            outcome
        })
    }

    /// Makes sure the mirror is being deleted, and tells whether it is gone.
    /// Room promised to the mirror and not taken by its Pods is free again.
    pub fn cleanup(&self, cluster: &str, uid: &str, key: &Key, reason: DeleteReason) -> Cleanup {
        self.release_room(cluster, uid);
        let mut clusters = self.lock();
        let state = clusters.entry(cluster.to_string()).or_default();
        let session = &state.session;
        let id = session.as_ref().map(|(id, _)| *id);
        state.mirrors.change(uid, key, |current| {
            let (send, outcome) = step(current, |state| mirror::cleanup(state, id, Instant::now()));
            if let (Some(Send::DeleteMirror), Some((_, outbox))) = (send, session) {
                let delete = DeleteMirror {
                    origin_uid: uid.to_string(),
                    namespace: key.namespace.clone(),
                    name: key.name.clone(),
                    reason: reason as i32,
                    kind: Some(key.kind.to_wire()),
                };
                let _ = outbox.send(message(Kind::DeleteMirror(delete)));
            }
            outcome
        })
    }

    /// Drops what is known about a mirror whose manager Job needs it no more.
    pub fn forget(&self, cluster: &str, uid: &str) {
        if let Some(state) = self.lock().get_mut(cluster) {
            state.mirrors.remove(uid);
        }
        self.release_room(cluster, uid);
    }

    /// Records a MirrorStatus (with what it says of the Pods: those that
    /// wait unschedulable, and all of them by phase and reason);
    /// returns the phase it replaced, if it changed,
    /// and, for the first report after an apply, how long the worker took to
    /// answer it. `None` for a mirror this manager does not want on the
    /// cluster (dropped).
    pub fn record_status(
        &self,
        cluster: &str,
        uid: &str,
        held: Held,
    ) -> Option<(Option<MirrorPhase>, Option<Duration>)> {
        let reported = self.update(cluster, uid, |state| {
            mirror::reported(state, held, Instant::now())
        })?;
        Some((reported.changed_from, reported.answered_after))
    }

    /// Records a MirrorGone; returns how long since the first DeleteMirror,
    /// if one was sent. `None` for a mirror not wanted here.
    pub fn record_gone(
        &self,
        cluster: &str,
        uid: &str,
        pods_deleted: u32,
    ) -> Option<Option<Duration>> {
        self.release_room(cluster, uid);
        self.update(cluster, uid, |state| {
            mirror::gone(state, pods_deleted, Instant::now())
        })
    }

    /// Records an ApplyRejected; `None` for a mirror not wanted here.
    pub fn record_rejected(&self, cluster: &str, uid: &str, rejection: Rejection) -> Option<()> {
        self.take_in(cluster, uid, Event::Refused(rejection))
    }

    /// Records a PodsHeld (kept while the mirror is being deleted, and
    /// wakes its Job); `None` for a mirror not wanted here.
    pub fn record_pods_held(&self, cluster: &str, uid: &str, pods: Vec<HeldPod>) -> Option<()> {
        self.take_in(cluster, uid, Event::PodsHeld(pods))
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
        let event = Event::Lost {
            mirror_uid: mirror_uid.to_string(),
            observed: observed.to_string(),
        };
        self.take_in(cluster, uid, event)
    }

    /// Notes that the manager Job shows the mirror's loss.
    pub fn lost_accounted(&self, cluster: &str, uid: &str) {
        if let Some(state) = self.lock().get_mut(cluster) {
            state
                .mirrors
                .change_existing(uid, |mirror| take_in(mirror, Event::LossShown));
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
        Some(clusters.get(cluster)?.mirrors.get(uid)?.key.kind)
    }

    /// The manager Job a mirror belongs to, if known.
    pub fn key_of(&self, cluster: &str, uid: &str) -> Option<Key> {
        Some(self.lock().get(cluster)?.mirrors.get(uid)?.key.clone())
    }

    /// Takes a report into a mirror this manager wants on the cluster and
    /// asks for its Job's reconcile; a report about any other origin UID
    /// changes nothing (`None`), so a peer cannot make the manager hold
    /// memory for uids it never placed there.
    fn update<A>(
        &self,
        cluster: &str,
        uid: &str,
        decide: impl FnOnce(State) -> Transition<A>,
    ) -> Option<A> {
        let mut clusters = self.lock();
        let (outcome, key) = clusters
            .get_mut(cluster)?
            .mirrors
            .change_existing(uid, |mirror| (step(mirror, decide).1, mirror.key.clone()))?;
        drop(clusters);
        let _ = self.triggers.send(key);
        Some(outcome)
    }

    /// [`Fleet::update`] with a report that needs no answer.
    fn take_in(&self, cluster: &str, uid: &str, event: Event) -> Option<()> {
        self.update(cluster, uid, |state| transition(state, event))
            .map(|_| ())
    }
}

#[derive(Debug, Default)]
pub(super) struct MirrorMap {
    /// By origin UID, hashed with a fast hasher: placement looks a UID up
    /// in every cluster's map, and UIDs are the API server's, not a peer's.
    mirrors: HashMap<String, Mirror, foldhash::fast::RandomState>,
    /// Mirrors held or being sent: not confirmed gone. What placement
    /// compares.
    active: usize,
    /// Mirrors whose worker reported holding a revision.
    held: usize,
}

/// What one mirror adds to each count.
fn weight(mirror: &Mirror) -> (usize, usize) {
    (
        usize::from(mirror.state.is_active()),
        usize::from(mirror.state.held().is_some()),
    )
}

impl MirrorMap {
    pub(super) fn get(&self, uid: &str) -> Option<&Mirror> {
        self.mirrors.get(uid)
    }

    pub(super) fn contains(&self, uid: &str) -> bool {
        self.mirrors.contains_key(uid)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&String, &Mirror)> {
        self.mirrors.iter()
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Mirror> {
        self.mirrors.values()
    }

    /// Mirrors wanted here and not confirmed gone: held or being sent.
    pub(super) fn active(&self) -> usize {
        self.active
    }

    /// Mirrors the worker reported holding.
    pub(super) fn held(&self) -> usize {
        self.held
    }

    pub(super) fn remove(&mut self, uid: &str) -> Option<Mirror> {
        let mirror = self.mirrors.remove(uid)?;
        self.subtract(weight(&mirror));
        Some(mirror)
    }

    /// Changes the mirror of `uid`, a mirror of `key` just placed if there
    /// is none.
    pub(super) fn change<T>(
        &mut self,
        uid: &str,
        key: &Key,
        change: impl FnOnce(&mut Mirror) -> T,
    ) -> T {
        let (mirror, before) = match self.mirrors.entry(uid.to_string()) {
            Entry::Occupied(known) => {
                let mirror = known.into_mut();
                if mirror.key != *key {
                    mirror.key = key.clone();
                }
                let before = weight(mirror);
                (mirror, before)
            }
            // Not counted yet.
            Entry::Vacant(new) => (new.insert(Mirror::placed(key.clone())), (0, 0)),
        };
        let result = change(mirror);
        let after = weight(mirror);
        self.recount(before, after);
        result
    }

    /// Changes the mirror of `uid` if there is one.
    pub(super) fn change_existing<T>(
        &mut self,
        uid: &str,
        change: impl FnOnce(&mut Mirror) -> T,
    ) -> Option<T> {
        let mirror = self.mirrors.get_mut(uid)?;
        let before = weight(mirror);
        let result = change(mirror);
        let after = weight(mirror);
        self.recount(before, after);
        Some(result)
    }

    /// Changes every mirror.
    pub(super) fn change_all(&mut self, mut change: impl FnMut(&str, &mut Mirror)) {
        let (mut active, mut held) = (0, 0);
        for (uid, mirror) in self.mirrors.iter_mut() {
            change(uid, mirror);
            let (a, h) = weight(mirror);
            active += a;
            held += h;
        }
        (self.active, self.held) = (active, held);
    }

    fn recount(&mut self, before: (usize, usize), after: (usize, usize)) {
        self.subtract(before);
        self.active += after.0;
        self.held += after.1;
    }

    fn subtract(&mut self, (active, held): (usize, usize)) {
        self.active -= active;
        self.held -= held;
    }
}
