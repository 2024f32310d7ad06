//! What each relayed object's Pods ask of a cluster, read from the whole
//! object as the watch brings it (the cache keeps no pod templates), and
//! the objects that wait because no cluster has room for that now.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use jobrelay_kinds::room::PodGroup;

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

/// An object that waits for room.
#[derive(Debug)]
struct Waiting {
    key: Key,
    why: String,
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
    pub fn set_waiting(&self, uid: &str, waiting: Option<(&Key, String)>) {
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
    pub fn waiting_for(&self, uid: &str) -> Option<(String, Duration)> {
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
        demands.set_waiting("u1", Some((&key, "no room".into())));
        let (why, _) = demands.waiting_for("u1").expect("waiting");
        assert_eq!(why, "no room");
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
            demands.set_waiting(name, Some((&key(name), "no room".into())));
        }
        demands.set_waiting("c", Some((&key("c"), "still no room".into())));
        assert_eq!(demands.waiting(), [key("c"), key("a"), key("b")]);
        demands.set_waiting("c", None);
        demands.set_waiting("c", Some((&key("c"), "no room again".into())));
        assert_eq!(demands.waiting(), [key("a"), key("b"), key("c")]);
    }
}
