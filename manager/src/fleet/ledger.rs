//! One cluster's room as the manager counts it: what its agent last
//! reported, less what is promised to Jobs placed there whose Pods have not
//! started yet — so Jobs placed together do not all land where the room of
//! one of them was.
//!
//! A promise is made when a Job is placed and dropped by the first report
//! that counts all of its Pods (the report names the mirrors it counts
//! more Pods of). From an agent that names none, it is marked started when
//! the mirror reports a Pod ready, and dropped by the second report after
//! that: reports come on the same stream as the status, but the first may
//! have been summed before the agent saw the Pods bound; the second was
//! summed after the first was sent. It is dropped at once when the mirror
//! reports its Job finished, or is deleted — and what is left is then
//! worked out again from the last report, which no longer needs a report
//! to come: a fleet with nothing running sends none.
//!
//! Where the agent reports its worker's own Kueue, a Job queued there is
//! promised quota of the ClusterQueue it goes to in the same way.

use std::collections::HashMap;

use jobrelay_kinds::room::fit::{self, Taken};
use jobrelay_kinds::room::{PodGroup, Pool, Queue, Resources, Room, quota};

#[derive(Debug, Default)]
pub struct Ledger {
    /// `None` until the agent reports room: the cluster's room is unknown.
    reported: Option<Room>,
    /// `reported`, less what is promised.
    left: Room,
    promises: HashMap<String, Promise>,
    /// Reports taken in.
    reports: u64,
}

#[derive(Debug)]
struct Promise {
    groups: Vec<PodGroup>,
    taken: Taken,
    /// The LocalQueue (`namespace/name`) of the worker's Kueue it is queued
    /// in, and the quota taken from the ClusterQueue that feeds.
    queued: Option<(String, Resources)>,
    /// `reports` when its Pods were seen started.
    started: Option<u64>,
}

impl Promise {
    /// The Pods promised room, in all.
    fn pods(&self) -> i64 {
        self.groups.iter().map(|group| group.pods).sum()
    }
}

impl Ledger {
    /// What the agent last reported, if it reported room.
    pub fn reported(&self) -> Option<&Room> {
        self.reported.as_ref()
    }

    /// What is left for new Jobs, once the agent reported room.
    pub fn left(&self) -> Option<&[Pool]> {
        self.reported.as_ref().map(|_| self.left.pools.as_slice())
    }

    /// Whether the agent reports its worker's Kueue's ClusterQueues.
    pub fn reports_queues(&self) -> bool {
        !self.left.queues.is_empty()
    }

    /// The ClusterQueue of the worker's Kueue that the LocalQueue
    /// `namespace/name` feeds, with what it has left, if the agent reports
    /// it.
    pub fn queue_left(&self, local_queue: &str) -> Option<&Queue> {
        self.left.queue_of(local_queue)
    }

    /// Takes in a report and the Pods it counts of each mirror it names
    /// (`counted`, by origin UID): drops the promises of Jobs all of whose
    /// Pods it counts, and of those whose Pods started before the last
    /// report, and takes the others out of it again. Says whether more is
    /// left anywhere than before — the report shows more room, or a promise
    /// it now counts was dropped — for only then may a waiting Job fit now.
    pub fn report(&mut self, room: Room, counted: &HashMap<String, u32>) -> bool {
        let first = self.reported.is_none();
        self.reports += 1;
        let reports = self.reports;
        self.promises.retain(|uid, promise| {
            let all_counted = counted
                .get(uid)
                .is_some_and(|pods| i64::from(*pods) >= promise.pods());
            !all_counted && promise.started.is_none_or(|at| reports < at + 2)
        });
        self.reported = Some(room);
        let before = self.recount();
        first || self.left.more_than(&before)
    }

    /// What is left worked out again: the last report less every promise
    /// held. Returns what was left before.
    fn recount(&mut self) -> Room {
        let reported = self.reported.clone().unwrap_or_default();
        let before = std::mem::replace(&mut self.left, reported);
        for promise in self.promises.values_mut() {
            // Room that shrank may no longer hold a promise: it then holds
            // nothing, and the scheduler on the worker decides.
            promise.taken = fit::take(&mut self.left.pools, &promise.groups).unwrap_or_default();
            if let Some((local_queue, taken)) = &mut promise.queued {
                *taken = take_quota(&mut self.left, local_queue, &promise.groups);
            }
        }
        before
    }

    /// Promises room to the Job `uid` placed here (once; a second promise
    /// for it changes nothing), and quota of the ClusterQueue that
    /// `queued_in` feeds if it is queued in the worker's Kueue.
    pub fn promise(&mut self, uid: &str, groups: Vec<PodGroup>, queued_in: Option<String>) {
        if self.promises.contains_key(uid) {
            return;
        }
        let taken = fit::take(&mut self.left.pools, &groups).unwrap_or_default();
        let queued = queued_in.map(|local_queue| {
            let taken = take_quota(&mut self.left, &local_queue, &groups);
            (local_queue, taken)
        });
        let promise = Promise {
            groups,
            taken,
            queued,
            started: None,
        };
        self.promises.insert(uid.to_string(), promise);
    }

    /// The Job's Pods started: the second report from now counts them.
    pub fn started(&mut self, uid: &str) {
        if let Some(promise) = self.promises.get_mut(uid) {
            promise.started.get_or_insert(self.reports);
        }
    }

    /// The Job's mirror is going or gone, or its Pods ended: its promise
    /// is dropped and what is left worked out again from the last report
    /// (which counts its Pods if they still run, and the next one will
    /// not). Says whether more is left than before.
    pub fn release(&mut self, uid: &str) -> bool {
        if self.promises.remove(uid).is_none() {
            return false;
        }
        let before = self.recount();
        self.left.more_than(&before)
    }
}

/// Takes the quota `groups` ask from the ClusterQueue `local_queue` feeds
/// in `room`, if it names one; returns what was taken.
fn take_quota(room: &mut Room, local_queue: &str, groups: &[PodGroup]) -> Resources {
    room.queue_of_mut(local_queue)
        .map(|queue| quota::take(&mut queue.free, groups))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use jobrelay_kinds::room::Resources;

    use super::*;

    fn pools(cpu: i64) -> Room {
        Room {
            pools: vec![Pool::one_node(Resources::from([
                ("cpu", cpu),
                ("pods", 110),
            ]))],
            queues: Vec::new(),
        }
    }

    fn job(pods: i64, cpu: i64) -> Vec<PodGroup> {
        vec![PodGroup {
            pods,
            each: Resources::from([("cpu", cpu), ("pods", 1)]),
            ..PodGroup::default()
        }]
    }

    fn cpu_left(ledger: &Ledger) -> i64 {
        ledger.left().expect("reported")[0].free.get("cpu")
    }

    #[test]
    fn before_a_report_the_room_is_unknown_and_everything_fits() {
        let mut ledger = Ledger::default();
        assert!(ledger.left().is_none());
        ledger.promise("a", job(1, 1000), None);
        ledger.report(pools(4000), &HashMap::new());
        assert_eq!(cpu_left(&ledger), 3000, "the earlier promise counts");
    }

    #[test]
    fn a_promise_holds_room_until_its_pods_start_and_a_report_counts_them() {
        let mut ledger = Ledger::default();
        ledger.report(pools(4000), &HashMap::new());
        ledger.promise("a", job(3, 1000), None);
        assert_eq!(cpu_left(&ledger), 1000);
        let left = ledger.left().expect("reported");
        assert!(
            fit::fits(left, &job(2, 1000)).is_err(),
            "a burst does not overfill"
        );
        ledger.promise("a", job(3, 1000), None);
        assert_eq!(cpu_left(&ledger), 1000, "promised once");
        ledger.started("a");
        assert_eq!(cpu_left(&ledger), 1000, "held until a report counts them");
        ledger.report(pools(4000), &HashMap::new());
        assert_eq!(
            cpu_left(&ledger),
            1000,
            "the first report may have been summed before the Pods were bound"
        );
        ledger.report(pools(1000), &HashMap::new());
        assert_eq!(cpu_left(&ledger), 1000, "the second report counts the Pods");
        ledger.report(pools(3000), &HashMap::new());
        assert_eq!(cpu_left(&ledger), 3000, "and the promise is gone");
        assert!(!ledger.release("a"), "nothing is given back twice");
        assert_eq!(cpu_left(&ledger), 3000);
    }

    #[test]
    fn only_a_report_that_leaves_more_room_somewhere_says_it_grew() {
        let mut ledger = Ledger::default();
        assert!(
            ledger.report(pools(4000), &HashMap::new()),
            "the first report"
        );
        assert!(!ledger.report(pools(4000), &HashMap::new()), "the same");
        assert!(!ledger.report(pools(3000), &HashMap::new()), "less");
        assert!(ledger.report(pools(3500), &HashMap::new()), "more again");
        let mut other = pools(1000);
        other.pools[0].labels.insert("pool".into(), "gpu".into());
        assert!(ledger.report(other, &HashMap::new()), "a new pool");
    }

    /// The report that counts all of a Job's Pods ends its promise at once;
    /// one that counts some of them, or another mirror's, does not.
    #[test]
    fn a_promise_ends_with_the_report_that_counts_all_its_pods() {
        let counted = |pairs: &[(&str, u32)]| -> HashMap<String, u32> {
            pairs
                .iter()
                .map(|(uid, pods)| (uid.to_string(), *pods))
                .collect()
        };
        let mut ledger = Ledger::default();
        ledger.report(pools(4000), &HashMap::new());
        ledger.promise("a", job(2, 1000), None);
        assert_eq!(cpu_left(&ledger), 2000);
        ledger.report(pools(3000), &counted(&[("a", 1), ("b", 2)]));
        assert_eq!(
            cpu_left(&ledger),
            1000,
            "one Pod counted: the promise holds"
        );
        assert!(
            ledger.report(pools(2000), &counted(&[("a", 2)])),
            "both counted: more left than the report alone would show held"
        );
        assert_eq!(cpu_left(&ledger), 2000, "the room is not taken twice");
        assert!(!ledger.release("a"), "nothing left to give back");
    }

    #[test]
    fn a_started_promise_dropped_leaves_more_room_though_the_report_shows_none() {
        let mut ledger = Ledger::default();
        ledger.report(pools(4000), &HashMap::new());
        ledger.promise("a", job(2, 1000), None);
        ledger.started("a");
        assert!(
            !ledger.report(pools(2000), &HashMap::new()),
            "the Pods counted and promised"
        );
        assert_eq!(cpu_left(&ledger), 0);
        assert!(
            ledger.report(pools(2000), &HashMap::new()),
            "the promise dropped"
        );
        assert_eq!(cpu_left(&ledger), 2000);
        assert!(!ledger.report(pools(2000), &HashMap::new()), "nothing more");
    }

    #[test]
    fn more_room_reported_that_a_waiting_promise_takes_leaves_no_more() {
        // Nodes of 1000 CPUs each: one free, then two.
        let nodes = |cpu: i64| Room {
            pools: vec![Pool {
                nodes: 2,
                free: Resources::from([("cpu", cpu), ("pods", 110)]),
                largest: Resources::from([("cpu", 1000), ("pods", 110)]),
                ..Pool::default()
            }],
            queues: Vec::new(),
        };
        let mut ledger = Ledger::default();
        ledger.report(nodes(1000), &HashMap::new());
        ledger.promise("a", job(2, 1000), None);
        assert_eq!(cpu_left(&ledger), 1000, "it found no room");
        assert!(
            !ledger.report(nodes(2000), &HashMap::new()),
            "the promise takes what grew"
        );
        assert_eq!(cpu_left(&ledger), 0);
    }

    #[test]
    fn a_finished_mirror_gives_its_room_back_without_waiting_for_a_report() {
        let mut ledger = Ledger::default();
        ledger.report(pools(4000), &HashMap::new());
        ledger.promise("a", job(2, 1000), None);
        ledger.started("a");
        ledger.report(pools(2000), &HashMap::new());
        assert_eq!(cpu_left(&ledger), 0, "its Pods counted and still promised");
        // Nothing runs any more, and no report need come: the room the
        // last report shows is left at once.
        assert!(ledger.release("a"), "more is left");
        assert_eq!(cpu_left(&ledger), 2000);
        assert!(!ledger.release("a"), "released once");
    }

    #[test]
    fn a_mirror_deleted_before_it_started_gives_its_room_back() {
        let mut ledger = Ledger::default();
        ledger.report(pools(4000), &HashMap::new());
        ledger.promise("a", job(2, 1000), None);
        ledger.release("a");
        assert_eq!(cpu_left(&ledger), 4000);
    }

    #[test]
    fn a_report_with_less_room_keeps_promises_that_still_fit() {
        let mut ledger = Ledger::default();
        ledger.report(pools(4000), &HashMap::new());
        ledger.promise("a", job(2, 1000), None);
        ledger.promise("b", job(2, 1000), None);
        ledger.report(pools(3000), &HashMap::new());
        assert_eq!(
            cpu_left(&ledger),
            1000,
            "one holds, the other finds no room"
        );
        ledger.release("a");
        ledger.release("b");
        assert_eq!(cpu_left(&ledger), 3000);
    }

    #[test]
    fn a_job_queued_in_the_workers_kueue_is_promised_its_queues_quota() {
        let mut ledger = Ledger::default();
        let mut room = pools(64000);
        room.queues = vec![Queue {
            name: "team".into(),
            local_queues: vec!["ns/lq".into()],
            free: Resources::from([("cpu", 4000)]),
        }];
        ledger.report(room.clone(), &HashMap::new());
        let quota = |ledger: &Ledger| ledger.queue_left("ns/lq").map(|q| q.free.get("cpu"));
        ledger.promise("a", job(3, 1000), Some("ns/lq".into()));
        assert_eq!(quota(&ledger), Some(1000));
        assert_eq!(cpu_left(&ledger), 61000);
        ledger.promise("b", job(1, 1000), None);
        assert_eq!(quota(&ledger), Some(1000), "not queued there");
        ledger.report(room.clone(), &HashMap::new());
        assert_eq!(quota(&ledger), Some(1000), "promised until its Pods start");
        assert!(ledger.release("a"), "given back");
        assert_eq!(quota(&ledger), Some(4000));
        assert_eq!(ledger.queue_left("other/lq"), None);
        let mut freer = room;
        freer.queues[0].free = Resources::from([("cpu", 5000)]);
        assert!(
            ledger.report(freer, &HashMap::new()),
            "more quota free is more room"
        );
    }
}
