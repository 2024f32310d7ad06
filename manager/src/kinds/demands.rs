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
    /// By UID: the object's key, why it waits, and when it was last found
    /// to.
    waiting: HashMap<String, (Key, String, Instant)>,
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
        match waiting {
            Some((key, why)) => {
                let entry = (key.clone(), why, Instant::now());
                inner.waiting.insert(uid.to_string(), entry)
            }
            None => inner.waiting.remove(uid),
        };
    }

    /// Why the object `uid` waits for room, if it does, and how long ago
    /// that was last found.
    pub fn waiting_for(&self, uid: &str) -> Option<(String, Duration)> {
        let inner = self.lock();
        let (_, why, at) = inner.waiting.get(uid)?;
        Some((why.clone(), at.elapsed()))
    }

    /// The keys of every object that waits for room.
    pub fn waiting(&self) -> Vec<Key> {
        let inner = self.lock();
        inner
            .waiting
            .values()
            .map(|(key, ..)| key.clone())
            .collect()
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
}
