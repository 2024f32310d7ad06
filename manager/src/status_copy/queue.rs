//! Which manager Job's status to copy next: Jobs whose mirror finished
//! first, then the others, each lane in the order its Jobs changed.
//!
//! kube-runtime's controller cannot order its work: once its reconciles are
//! all busy, the Jobs it holds back wait in a hash set and come out in any
//! order, so under a wave of changes a Job that finished early could wait
//! behind thousands that merely started — a long tail for the status users
//! watch most. The status copy therefore runs on this queue: a Job is queued
//! at most once, never worked twice at once, and a change that arrives while
//! it is worked queues it again when that work is done.
//!
//! A change of a Job in the progress lane is queued [`PROGRESS_HOLD`] after
//! it came, not at once: Pods getting ready, the success criteria met just
//! before the Job completes, take one status write with what follows
//! within the hold. A finished Job is queued at once, and so is a Job whose
//! worker runs Pods the manager Job does not show yet: Kueue releases an
//! evicted Job's quota once its `active` is 0, so the manager Job must show
//! its worker's Pods as soon as there are any.
//!
//! Jobs in the progress lane are worked at most `progress_limit` at once, so
//! the rest of the workers are always free for a finished Job: when the
//! manager's API server is slow, its writes wait for it, not for a worker
//! busy with a Job that merely started. A progress change that waits
//! meanwhile is merged with the next change of the same Job, so fewer
//! writes are made the busier the server is.

use std::collections::HashMap;
use std::time::Duration;

use kube::runtime::reflector::ObjectRef;

use crate::controller::changes::{ChangedKeys, Changing};

/// How soon a Job's status is copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lane {
    /// Its mirror is starting, running or suspended.
    Progress,
    /// Its mirror finished: the change users wait for.
    Finished,
}

/// How long a change of a Job in the progress lane waits to be queued.
pub const PROGRESS_HOLD: Duration = Duration::from_secs(1);

impl Lane {
    /// How long a change of a Job in this lane waits before it is queued;
    /// `shows_new_pods` says whether the worker runs Pods the manager Job
    /// shows none of, asked only of a Job in the progress lane.
    pub fn hold(self, shows_new_pods: impl FnOnce() -> bool) -> Duration {
        match self {
            Lane::Progress if !shows_new_pods() => PROGRESS_HOLD,
            Lane::Progress | Lane::Finished => Duration::ZERO,
        }
    }
}

#[derive(Debug)]
pub struct StatusQueue<K: Changing> {
    finished: ChangedKeys<K>,
    progress: ChangedKeys<K>,
    /// Jobs being worked (as many as there are workers).
    working: HashMap<ObjectRef<K>, Working>,
    progress_limit: usize,
}

/// A Job being worked: the lane it was taken from, and the lane of a change
/// that came meanwhile.
#[derive(Debug)]
struct Working {
    from: Lane,
    again: Option<Lane>,
}

impl<K: Changing> StatusQueue<K> {
    /// A queue that hands out at most `progress_limit` Jobs of the progress
    /// lane at once (at least one).
    pub fn new(progress_limit: usize) -> Self {
        Self {
            finished: ChangedKeys::default(),
            progress: ChangedKeys::default(),
            working: HashMap::new(),
            progress_limit: progress_limit.max(1),
        }
    }

    /// Queues `key` in `lane` (a Job queued in the progress lane moves to
    /// the finished one); a Job being worked is queued once its work is done.
    pub fn mark(&mut self, key: ObjectRef<K>, lane: Lane) {
        if let Some(working) = self.working.get_mut(&key) {
            working.again = working.again.max(Some(lane));
            return;
        }
        match lane {
            Lane::Finished => {
                self.progress.remove(&key);
                self.finished.mark(key);
            }
            Lane::Progress if self.finished.contains(&key) => {}
            Lane::Progress => self.progress.mark(key),
        }
    }

    /// The next Job to work, now counted as being worked: a finished one,
    /// else one of the progress lane while fewer than its limit are worked.
    pub fn take(&mut self) -> Option<ObjectRef<K>> {
        let (key, from) = match self.finished.take() {
            Some(key) => (key, Lane::Finished),
            None if self.progress_has_room() => (self.progress.take()?, Lane::Progress),
            None => return None,
        };
        self.working
            .insert(key.clone(), Working { from, again: None });
        Some(key)
    }

    /// The work on `key` is done; it is queued again if it changed meanwhile.
    pub fn done(&mut self, key: &ObjectRef<K>) {
        if let Some(Working {
            again: Some(lane), ..
        }) = self.working.remove(key)
        {
            self.mark(key.clone(), lane);
        }
    }

    /// Jobs queued, not counting those being worked.
    pub fn len(&self) -> usize {
        self.finished.len() + self.progress.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether [`take`](Self::take) has a Job to hand out now.
    pub fn can_take(&self) -> bool {
        !self.finished.is_empty() || (!self.progress.is_empty() && self.progress_has_room())
    }

    /// Whether fewer Jobs of the progress lane than its limit are worked.
    fn progress_has_room(&self) -> bool {
        let worked = self.working.values().filter(|w| w.from == Lane::Progress);
        worked.count() < self.progress_limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;

    type Key = ObjectRef<Job>;

    fn key(name: &str) -> Key {
        ObjectRef::new(name).within("ns")
    }

    #[test]
    fn a_change_on_the_way_waits_to_be_merged_with_the_next() {
        assert_eq!(Lane::Progress.hold(|| false), PROGRESS_HOLD);
    }

    #[test]
    fn a_finished_job_is_queued_at_once() {
        assert_eq!(Lane::Finished.hold(|| false), Duration::ZERO);
        assert_eq!(Lane::Finished.hold(|| true), Duration::ZERO);
        assert_eq!(
            Lane::Finished.hold(|| unreachable!("a finished Job's Pods are not looked at")),
            Duration::ZERO
        );
    }

    #[test]
    fn pods_the_manager_job_does_not_show_yet_are_shown_at_once() {
        assert_eq!(Lane::Progress.hold(|| true), Duration::ZERO);
    }

    fn drain(queue: &mut StatusQueue<Job>) -> Vec<String> {
        let mut taken = Vec::new();
        while let Some(k) = queue.take() {
            queue.done(&k);
            taken.push(k.name);
        }
        taken
    }

    #[test]
    fn finished_jobs_go_first_and_each_lane_keeps_its_order() {
        let mut queue = StatusQueue::new(8);
        queue.mark(key("p1"), Lane::Progress);
        queue.mark(key("f1"), Lane::Finished);
        queue.mark(key("p2"), Lane::Progress);
        queue.mark(key("f2"), Lane::Finished);
        assert_eq!(queue.len(), 4);
        assert_eq!(drain(&mut queue), ["f1", "f2", "p1", "p2"]);
        assert!(queue.is_empty());
    }

    #[test]
    fn a_job_that_finishes_while_queued_moves_to_the_finished_lane_once() {
        let mut queue = StatusQueue::new(8);
        queue.mark(key("a"), Lane::Progress);
        queue.mark(key("b"), Lane::Progress);
        queue.mark(key("b"), Lane::Finished);
        queue.mark(key("b"), Lane::Progress);
        assert_eq!(queue.len(), 2);
        assert_eq!(drain(&mut queue), ["b", "a"]);
    }

    #[test]
    fn a_job_is_never_worked_twice_at_once_and_a_change_meanwhile_queues_it_again() {
        let mut queue = StatusQueue::new(8);
        queue.mark(key("a"), Lane::Progress);
        let a = queue.take().expect("a");
        queue.mark(key("a"), Lane::Progress);
        queue.mark(key("a"), Lane::Finished);
        queue.mark(key("b"), Lane::Progress);
        assert_eq!(queue.take(), Some(key("b")), "a is being worked");
        assert_eq!(queue.take(), None);
        queue.done(&a);
        assert_eq!(queue.len(), 1);
        let again = queue.take().expect("a again");
        assert_eq!(again, key("a"));
        queue.done(&again);
        queue.done(&key("b"));
        assert!(queue.is_empty());
        assert_eq!(queue.take(), None, "no change since: not queued again");
    }

    #[test]
    fn progress_jobs_are_worked_at_most_their_limit_at_once_finished_ones_always() {
        let mut queue = StatusQueue::new(2);
        for name in ["p1", "p2", "p3"] {
            queue.mark(key(name), Lane::Progress);
        }
        let p1 = queue.take().expect("p1");
        let p2 = queue.take().expect("p2");
        assert!(!queue.can_take(), "two progress Jobs are worked");
        assert_eq!(queue.take(), None);
        queue.mark(key("f1"), Lane::Finished);
        queue.mark(key("f2"), Lane::Finished);
        assert!(queue.can_take());
        assert_eq!(queue.take(), Some(key("f1")));
        assert_eq!(queue.take(), Some(key("f2")));
        assert_eq!(queue.take(), None, "p3 waits for a progress Job to be done");
        queue.done(&key("f1"));
        assert_eq!(
            queue.take(),
            None,
            "a finished Job done frees no progress place"
        );
        queue.done(&p1);
        assert_eq!(queue.take(), Some(key("p3")));
        queue.done(&p2);
        queue.done(&key("p3"));
        queue.done(&key("f2"));
        assert!(queue.is_empty());
        assert!(!queue.can_take());
    }

    #[test]
    fn a_progress_job_that_finishes_while_worked_goes_to_the_finished_lane_past_the_limit() {
        let mut queue = StatusQueue::new(1);
        queue.mark(key("a"), Lane::Progress);
        queue.mark(key("b"), Lane::Progress);
        let a = queue.take().expect("a");
        queue.mark(key("a"), Lane::Finished);
        queue.done(&a);
        queue.mark(key("c"), Lane::Progress);
        assert_eq!(queue.take(), Some(key("a")), "finished goes first");
        let b = queue.take().expect("b: a's progress place is free again");
        assert_eq!(b, key("b"));
        assert_eq!(queue.take(), None, "c waits for b");
        queue.done(&b);
        assert_eq!(queue.take(), Some(key("c")));
    }

    #[test]
    fn a_limit_of_zero_still_works_the_progress_lane() {
        let mut queue = StatusQueue::new(0);
        queue.mark(key("p"), Lane::Progress);
        assert_eq!(queue.take(), Some(key("p")));
    }
}
