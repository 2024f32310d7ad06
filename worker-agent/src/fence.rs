//! Fencing: an agent that has heard no manager for `fenceAfter` stops every
//! mirror it holds, so a Job the manager places elsewhere once the cluster
//! is Lost (after its longer `lostAfter`) never runs beside its old copy.
//! A mirror is suspended (its Pods are deleted by the worker's Job
//! controller); one queued in the worker's own Kueue, which owns its
//! `suspend` and would resume it, is deleted instead. When a manager is
//! heard again, its DesiredSet decides what resumes: a fenced mirror shows
//! revision 0 in the next Hello, so the manager applies it again.
//!
//! What is decided here is plain data: when the fence is due ([`Clock`]),
//! and what it does to each mirror ([`plan`]). `mirrors::fencing` carries it
//! out.

use std::time::{Duration, Instant};

/// The agent's clock against the manager's silence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// The cluster's `fenceAfter`, as the last Welcome said (or the flag's
    /// value before one did).
    pub after: Duration,
    /// When a manager that welcomed this agent was last heard (the agent's
    /// start before one was).
    pub heard: Instant,
    /// The mirrors were fenced since `heard`.
    pub fenced: bool,
}

impl Clock {
    pub fn new(after: Duration, now: Instant) -> Self {
        Clock {
            after,
            heard: now,
            fenced: false,
        }
    }

    /// A welcomed manager spoke at `at`: the fence, if up, is lifted.
    pub fn heard(&mut self, at: Instant) {
        if at > self.heard {
            self.heard = at;
            self.fenced = false;
        }
    }

    /// When the fence is due: `None` while it is up.
    pub fn due_at(&self) -> Option<Instant> {
        (!self.fenced).then(|| self.heard + self.after)
    }
}

/// A mirror of this origin as the fence sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub uid: String,
    /// It finished, or is being deleted: it runs nothing any more.
    pub done: bool,
    pub suspended: bool,
    /// Queued in the worker's own Kueue, which owns its `suspend`.
    pub queued_here: bool,
}

/// What the fence does to one mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Suspend it; its revision is noted as 0, so the manager applies it
    /// again when it wants it to run.
    Suspend,
    /// Delete it, Pods and all: the worker's Kueue would resume a suspended
    /// one.
    Delete,
}

/// What the fence does to each of `held`: mirrors that may run Pods are
/// stopped; finished, deleted and suspended ones are left as they are.
pub fn plan(held: &[Held]) -> Vec<(String, Action)> {
    held.iter()
        .filter(|mirror| !mirror.done)
        .filter_map(|mirror| {
            let action = match (mirror.queued_here, mirror.suspended) {
                (true, _) => Action::Delete,
                (false, false) => Action::Suspend,
                (false, true) => return None,
            };
            Some((mirror.uid.clone(), action))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const AFTER: Duration = Duration::from_secs(30);

    fn held(uid: &str, done: bool, suspended: bool, queued_here: bool) -> Held {
        Held {
            uid: uid.into(),
            done,
            suspended,
            queued_here,
        }
    }

    #[test]
    fn the_fence_is_due_fence_after_the_manager_was_last_heard() {
        let start = Instant::now();
        let mut clock = Clock::new(AFTER, start);
        assert_eq!(clock.due_at(), Some(start + AFTER));
        clock.heard(start + Duration::from_secs(5));
        assert_eq!(clock.due_at(), Some(start + Duration::from_secs(35)));
    }

    #[test]
    fn a_fence_up_is_not_due_again_until_a_manager_is_heard() {
        let start = Instant::now();
        let mut clock = Clock::new(AFTER, start);
        clock.fenced = true;
        assert_eq!(clock.due_at(), None);
        clock.heard(start);
        assert_eq!(
            clock.due_at(),
            None,
            "what was heard before does not lift it"
        );
        clock.heard(start + Duration::from_secs(40));
        assert!(!clock.fenced);
        assert_eq!(clock.due_at(), Some(start + Duration::from_secs(70)));
    }

    #[test]
    fn a_running_mirror_is_suspended() {
        let actions = plan(&[held("a", false, false, false)]);
        assert_eq!(actions, [("a".to_string(), Action::Suspend)]);
    }

    #[test]
    fn a_mirror_queued_in_the_workers_kueue_is_deleted_suspended_or_not() {
        let actions = plan(&[held("a", false, false, true), held("b", false, true, true)]);
        assert_eq!(
            actions,
            [
                ("a".to_string(), Action::Delete),
                ("b".to_string(), Action::Delete)
            ]
        );
    }

    #[test]
    fn finished_deleted_and_suspended_mirrors_are_left_as_they_are() {
        let actions = plan(&[
            held("done", true, false, false),
            held("done-queued", true, false, true),
            held("suspended", false, true, false),
        ]);
        assert!(actions.is_empty(), "{actions:?}");
    }
}
