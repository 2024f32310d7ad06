//! What each relayed object's Pods ask of a cluster, read from the whole
//! object as the watch brings it (the cache keeps no pod templates), and
//! the objects that wait because no cluster has room for that now.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use jobrelay_kinds::room::PodGroup;
use jobrelay_kinds::room::fit::Shortfall;

use super::{Key, RelayedKind};

#[derive(Debug, Default)]
pub struct Demands {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// By UID.
    groups: HashMap<String, Vec<PodGroup>>,
    /// By UID.
    waiting: HashMap<String, Waiting>,
    /// Objects found to wait so far: the turn of the next.
    turns: u64,
}

/// Why an object waits for room.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoRoom {
    /// Each cluster that would take it, and what is short there, in words.
    pub why: String,
    /// The same without the counts: which clusters, and on each whether no
    /// pool admits its Pods or what runs short (room or a queue's quota, and
    /// of which resources). A waiting object is told again only when this
    /// changes; the counts change with every Pod that starts or ends.
    pub short: String,
}

impl NoRoom {
    /// Why, from what is short on each cluster that would take the object.
    pub fn of(short: &[(String, Shortfall)]) -> NoRoom {
        let join = |each: &dyn Fn(&String, &Shortfall) -> String| {
            let parts: Vec<String> = short.iter().map(|(c, s)| each(c, s)).collect();
            parts.join("; ")
        };
        NoRoom {
            why: join(&|cluster, shortfall| format!("{cluster}: {shortfall}")),
            short: join(&|cluster, shortfall| match shortfall {
                Shortfall::NoPoolAdmits => format!("{cluster}: no pool"),
                Shortfall::Room { short_of, .. } => {
                    format!("{cluster}: room [{}]", short_of.join(","))
                }
                Shortfall::Quota { queue, short_of } => {
                    format!("{cluster}: quota of {queue} [{}]", short_of.join(","))
                }
            }),
        }
    }
}

/// An object that waits for room.
#[derive(Debug)]
struct Waiting {
    key: Key,
    why: NoRoom,
    /// Its turn among the waiting: the earlier it was first found to wait,
    /// the lower.
    turn: u64,
    /// When it was last found to wait.
    last: Instant,
}

impl Demands {
    /// Records what `object` (whole) asks for.
    pub fn record<K: RelayedKind>(&self, object: &K) {
        if let Some(uid) = &object.meta().uid
            && object.is_whole()
        {
            self.lock().groups.insert(uid.clone(), object.pod_groups());
        }
    }

    /// What the object `uid` asks for; nothing if it was never seen whole.
    pub fn of(&self, uid: &str) -> Vec<PodGroup> {
        self.lock().groups.get(uid).cloned().unwrap_or_default()
    }

    /// The object `uid` is gone.
    pub fn forget(&self, uid: &str) {
        let mut inner = self.lock();
        inner.groups.remove(uid);
        inner.waiting.remove(uid);
    }

    /// The object `uid` waits for room, for `why` (or waits no more).
    pub fn set_waiting(&self, uid: &str, waiting: Option<(&Key, NoRoom)>) {
        let mut inner = self.lock();
        let Some((key, why)) = waiting else {
            inner.waiting.remove(uid);
            return;
        };
        let turn = match inner.waiting.get(uid) {
            Some(waiting) => waiting.turn,
            None => {
                inner.turns += 1;
                inner.turns
            }
        };
        let entry = Waiting {
            key: key.clone(),
            why,
            turn,
            last: Instant::now(),
        };
        inner.waiting.insert(uid.to_string(), entry);
    }

    /// Why the object `uid` waits for room, if it does, and how long ago
    /// that was last found.
    pub fn waiting_for(&self, uid: &str) -> Option<(NoRoom, Duration)> {
        let inner = self.lock();
        let waiting = inner.waiting.get(uid)?;
        Some((waiting.why.clone(), waiting.last.elapsed()))
    }

    /// The keys of every object that waits for room, the longest waiting
    /// first: woken in this order, they are placed roughly in it.
    pub fn waiting(&self) -> Vec<Key> {
        let inner = self.lock();
        let mut waiting: Vec<&Waiting> = inner.waiting.values().collect();
        waiting.sort_by_key(|w| w.turn);
        waiting.into_iter().map(|w| w.key.clone()).collect()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::Job;

    use super::*;

    fn no_room(why: &str) -> NoRoom {
        NoRoom {
            why: why.into(),
            short: why.into(),
        }
    }

    /// A case: what is short on each cluster; the words, and without the
    /// counts.
    type Case = (
        &'static str,
        Vec<(&'static str, Shortfall)>,
        &'static str,
        &'static str,
    );

    /// What is short on each cluster, in words and without the counts.
    #[test]
    fn why_a_job_waits_and_what_tells_it_again() {
        let room = |fit, short_of: &[&str]| Shortfall::Room {
            fit,
            wanted: 4,
            short_of: short_of.iter().map(|r| r.to_string()).collect(),
        };
        let quota = Shortfall::Quota {
            queue: "q".into(),
            short_of: vec!["cpu".into()],
        };
        let on = |pairs: Vec<(&str, Shortfall)>| {
            let pairs: Vec<(String, Shortfall)> =
                pairs.into_iter().map(|(c, s)| (c.to_string(), s)).collect();
            NoRoom::of(&pairs)
        };
        #[rustfmt::skip]
        let cases: [Case; 4] = [
            ("room short",     vec![("w1", room(2, &[]))],
                               "w1: room for 2 of 4 Pods", "w1: room []"),
            ("short of cpu",   vec![("w1", room(0, &["cpu"])), ("w2", Shortfall::NoPoolAdmits)],
                               "w1: room for 0 of 4 Pods; short of cpu; w2: no schedulable node matches its node selector, affinity and tolerations",
                               "w1: room [cpu]; w2: no pool"),
            ("a queue",        vec![("w1", quota)],
                               "w1: its Kueue's ClusterQueue q has too little quota free; short of cpu",
                               "w1: quota of q [cpu]"),
            ("nowhere",        vec![], "", ""),
        ];
        for (case, pairs, why, short) in cases {
            let no_room = on(pairs);
            assert_eq!(
                (no_room.why.as_str(), no_room.short.as_str()),
                (why, short),
                "{case}"
            );
        }
        let (before, after) = (
            on(vec![("w1", room(1, &[]))]),
            on(vec![("w1", room(3, &[]))]),
        );
        assert_ne!(before.why, after.why, "the counts are in the words");
        assert_eq!(
            before.short, after.short,
            "but do not tell a waiting Job again"
        );
    }

    #[test]
    fn what_a_whole_job_asks_is_kept_until_it_is_gone() {
        let demands = Demands::default();
        let mut job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "namespace": "ns", "uid": "u1"},
            "spec": {"parallelism": 3, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}},
        }))
        .expect("a Job");
        demands.record(&job);
        assert_eq!(demands.of("u1")[0].pods, 3);
        assert_eq!(demands.of("u1")[0].each.get("cpu"), 2000);
        job.for_cache();
        demands.record(&job);
        assert_eq!(demands.of("u1")[0].pods, 3, "a cached copy changes nothing");
        let key = Key::from_obj(&job);
        demands.set_waiting("u1", Some((&key, no_room("no room"))));
        let (why, _) = demands.waiting_for("u1").expect("waiting");
        assert_eq!(why.why, "no room");
        assert_eq!(demands.waiting(), [key]);
        demands.forget("u1");
        assert!(demands.of("u1").is_empty() && demands.waiting().is_empty());
    }

    #[test]
    fn the_longest_waiting_come_first_however_often_they_were_found_to_wait() {
        let demands = Demands::default();
        let key = |name: &str| {
            Key::of(&kube::runtime::reflector::ObjectRef::<Job>::new(name).within("ns"))
        };
        for name in ["c", "a", "b"] {
            demands.set_waiting(name, Some((&key(name), no_room("no room"))));
        }
        demands.set_waiting("c", Some((&key("c"), no_room("still no room"))));
        assert_eq!(demands.waiting(), [key("c"), key("a"), key("b")]);
        demands.set_waiting("c", None);
        demands.set_waiting("c", Some((&key("c"), no_room("no room again"))));
        assert_eq!(demands.waiting(), [key("a"), key("b"), key("c")]);
    }
}
