//! One cluster's mirror views with the counts placement and the cluster's
//! status read, kept as the views change: every change goes through here,
//! so a count cannot drift from the views, and placing a wave of new Jobs
//! costs one count per cluster rather than a pass over every mirror.

use std::collections::HashMap;

use crate::job::views::MirrorView;

#[derive(Debug, Default)]
pub(super) struct MirrorMap {
    /// By origin UID, hashed with a fast hasher: placement looks a UID up
    /// in every cluster's map, and UIDs are the API server's, not a peer's.
    views: HashMap<String, MirrorView, foldhash::fast::RandomState>,
    /// Views of mirrors held or being sent: wanted (a key) and not
    /// confirmed gone. What placement compares.
    active: usize,
    /// Views whose worker reported holding a revision.
    held: usize,
}

/// What one view adds to each count.
fn weight(view: &MirrorView) -> (usize, usize) {
    (
        usize::from(view.gone.is_none() && view.key.is_some()),
        usize::from(view.held_revision.is_some()),
    )
}

impl MirrorMap {
    pub(super) fn get(&self, uid: &str) -> Option<&MirrorView> {
        self.views.get(uid)
    }

    pub(super) fn contains(&self, uid: &str) -> bool {
        self.views.contains_key(uid)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &MirrorView> {
        self.views.values()
    }

    /// Mirrors wanted here and not confirmed gone: held or being sent.
    pub(super) fn active(&self) -> usize {
        self.active
    }

    /// Mirrors the worker reported holding.
    pub(super) fn held(&self) -> usize {
        self.held
    }

    pub(super) fn remove(&mut self, uid: &str) -> Option<MirrorView> {
        let view = self.views.remove(uid)?;
        self.subtract(weight(&view));
        Some(view)
    }

    /// Changes the view of `uid`, starting an empty one if there is none.
    pub(super) fn change<T>(&mut self, uid: &str, change: impl FnOnce(&mut MirrorView) -> T) -> T {
        let view = self.views.entry(uid.to_string()).or_default();
        let before = weight(view);
        let result = change(view);
        let after = weight(view);
        self.recount(before, after);
        result
    }

    /// Changes the view of `uid` if there is one.
    pub(super) fn change_existing<T>(
        &mut self,
        uid: &str,
        change: impl FnOnce(&mut MirrorView) -> T,
    ) -> Option<T> {
        let view = self.views.get_mut(uid)?;
        let before = weight(view);
        let result = change(view);
        let after = weight(view);
        self.recount(before, after);
        Some(result)
    }

    /// Changes every view.
    pub(super) fn change_all(&mut self, mut change: impl FnMut(&mut MirrorView)) {
        let (mut active, mut held) = (0, 0);
        for view in self.views.values_mut() {
            change(view);
            let (a, h) = weight(view);
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
