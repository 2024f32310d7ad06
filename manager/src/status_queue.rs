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

use std::collections::HashMap;

use k8s_openapi::api::batch::v1::Job;
use kube::runtime::reflector::ObjectRef;

use crate::job_changes::Pending;

type Key = ObjectRef<Job>;

/// How soon a Job's status is copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lane {
    /// Its mirror is starting, running or suspended.
    Progress,
    /// Its mirror finished: the change users wait for.
    Finished,
}

#[derive(Debug, Default)]
pub struct StatusQueue {
    finished: Pending,
    progress: Pending,
    /// Jobs being worked, with the lane of a change that came meanwhile.
    working: HashMap<Key, Option<Lane>>,
}

impl StatusQueue {
    /// Queues `key` in `lane` (a Job queued in the progress lane moves to
    /// the finished one); a Job being worked is queued once its work is done.
    pub fn mark(&mut self, key: Key, lane: Lane) {
        if let Some(again) = self.working.get_mut(&key) {
            *again = (*again).max(Some(lane));
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

    /// The next Job to work, now counted as being worked.
    pub fn take(&mut self) -> Option<Key> {
        let key = self.finished.take().or_else(|| self.progress.take())?;
        self.working.insert(key.clone(), None);
        Some(key)
    }

    /// The work on `key` is done; it is queued again if it changed meanwhile.
    pub fn done(&mut self, key: &Key) {
        if let Some(Some(lane)) = self.working.remove(key) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        ObjectRef::new(name).within("ns")
    }

    fn drain(queue: &mut StatusQueue) -> Vec<String> {
        let mut taken = Vec::new();
        while let Some(k) = queue.take() {
            queue.done(&k);
            taken.push(k.name);
        }
        taken
    }

    #[test]
    fn finished_jobs_go_first_and_each_lane_keeps_its_order() {
        let mut queue = StatusQueue::default();
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
        let mut queue = StatusQueue::default();
        queue.mark(key("a"), Lane::Progress);
        queue.mark(key("b"), Lane::Progress);
        queue.mark(key("b"), Lane::Finished);
        queue.mark(key("b"), Lane::Progress);
        assert_eq!(queue.len(), 2);
        assert_eq!(drain(&mut queue), ["b", "a"]);
    }

    #[test]
    fn a_job_is_never_worked_twice_at_once_and_a_change_meanwhile_queues_it_again() {
        let mut queue = StatusQueue::default();
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
}
