//! Placing Jobs by the room the agents report: each cluster's [`Ledger`],
//! the choice between clusters ([`choose_cluster`]), and the Jobs that wait
//! for room, woken when room may have appeared.

use std::collections::HashMap;

use jobrelay_kinds::room::Room;
use jobrelay_proto::kinds;

use super::Fleet;
use crate::job::placement::{Choice, Offer, Wants, choose_cluster};
use crate::kinds::Key;
use crate::kinds::demands::NoRoom;

impl Fleet {
    /// Chooses the cluster for a Job that has none yet — the pinned one,
    /// else a connected cluster that `eligible` says may take it, mirrors
    /// its kind and has room for its Pods (and, where it would be queued in
    /// the worker's own Kueue, quota there), the first of `wants.fill` that
    /// does if it gives an order — and counts the Job
    /// and its room there at once, so Jobs created together spread. Asked
    /// again for the same Job, it gives the same answer. A Job that fits
    /// nowhere is remembered as waiting, with why, and reconciled again
    /// when room may have appeared.
    pub fn place(
        &self,
        uid: &str,
        key: &Key,
        wants: Wants,
        eligible: impl Fn(&str) -> bool,
    ) -> Choice {
        let groups = self.demands.of(uid);
        let mut clusters = self.lock();
        if let Some((name, _)) = clusters.iter().find(|(_, c)| c.mirrors.contains(uid)) {
            return Choice::On(name.clone());
        }
        // Only an agent that mirrors the kind is given one.
        let mirrors_kind = |name: &str| {
            let kinds = clusters.get(name).map(|c| c.kinds.as_slice());
            kinds::mirrors(kinds.unwrap_or_default(), key.kind)
        };
        // By name, as the map is ordered: the first of equals wins.
        let offers = clusters
            .iter()
            .filter(|(_, c)| c.session.is_some())
            .map(|(name, c)| Offer {
                name,
                active_mirrors: c.mirrors.active(),
                left: c.room.left(),
                // The LocalQueue is worked out only where queues are
                // reported: most clusters report none.
                queue: c
                    .room
                    .reports_queues()
                    .then(|| wants.queued_in(name))
                    .flatten()
                    .and_then(|local_queue| c.room.queue_left(&local_queue)),
            });
        let takes = |name: &str| mirrors_kind(name) && eligible(name);
        let choice = choose_cluster(wants.pinned, wants.fill, offers, takes, &groups);
        if let Choice::On(name) = &choice {
            let queued_in = wants.queued_in(name);
            let cluster = clusters.entry(name.clone()).or_default();
            cluster.mirrors.change(uid, key, |_| ());
            cluster.room.promise(uid, groups, queued_in);
        }
        drop(clusters);
        self.wait_for_room(uid, key, &choice);
        choice
    }

    /// Why no cluster has room for the Job `uid`, while it waits for some,
    /// and how long ago placement last found so.
    pub fn awaiting_room(&self, uid: &str) -> Option<(NoRoom, std::time::Duration)> {
        self.demands.waiting_for(uid)
    }

    /// Takes in the room the agent of `cluster` reports, with the Pods it
    /// counts of the mirrors it names, and wakes the Jobs that wait for
    /// room if it shows more than before.
    pub fn set_room(&self, cluster: &str, room: Room, counted: &HashMap<String, u32>) {
        let mut clusters = self.lock();
        let grew = clusters
            .entry(cluster.to_string())
            .or_default()
            .room
            .report(room, counted);
        drop(clusters);
        if grew {
            self.wake_awaiting_room();
        }
    }

    /// Pods of the mirror of `uid` on `cluster` started (one is ready, or
    /// finished): the agent's reports count their room from now on.
    pub fn pods_started(&self, cluster: &str, uid: &str) {
        if let Some(state) = self.lock().get_mut(cluster) {
            state.room.started(uid);
        }
    }

    /// The mirror of `uid` on `cluster` finished, is going or gone: room
    /// promised to it is free again (its Pods, if still counted, go with
    /// the next report).
    pub fn release_room(&self, cluster: &str, uid: &str) {
        let released = self
            .lock()
            .get_mut(cluster)
            .is_some_and(|state| state.room.release(uid));
        if released {
            self.wake_awaiting_room();
        }
    }

    fn wait_for_room(&self, uid: &str, key: &Key, choice: &Choice) {
        let why = match choice {
            Choice::NoRoom(short) => Some(NoRoom::of(short)),
            _ => None,
        };
        self.demands.set_waiting(uid, why.map(|why| (key, why)));
    }

    /// Reconciles every Job that waits for room: each is placed if it fits
    /// now, and waits again if not.
    fn wake_awaiting_room(&self) {
        self.trigger_all(self.demands.waiting());
    }
}
