//! One cluster's mirrors with the counts placement and the cluster's
//! status read, kept as the mirrors change: every change goes through here,
//! so a count cannot drift from the states, and placing a wave of new Jobs
//! costs one count per cluster rather than a pass over every mirror.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use crate::kinds::Key;
use crate::mirror::Mirror;

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
