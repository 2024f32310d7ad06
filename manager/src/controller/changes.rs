//! Which relayed objects of one kind changed since a controller last
//! looked, one set per controller, fed from the kind's watch.
//!
//! Each set holds an object's key at most once, so a replica that is not
//! leading (its controllers idle) remembers at most one key per object
//! however long it follows, and an object deleted meanwhile is skipped when
//! its turn comes. The stream a controller reads yields each changed object
//! as the cache holds it now.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use futures::Stream;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;
use tokio::sync::Notify;

/// What the sets hold: keys of one kind's relayed objects.
pub trait Changing: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static {}

impl<K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + 'static> Changing for K {}

/// Keys of changed Jobs, in the order they first changed.
#[derive(Debug)]
pub struct ChangedKeys<K: Changing> {
    order: VecDeque<ObjectRef<K>>,
    queued: HashSet<ObjectRef<K>>,
}

impl<K: Changing> Default for ChangedKeys<K> {
    fn default() -> Self {
        ChangedKeys {
            order: VecDeque::new(),
            queued: HashSet::new(),
        }
    }
}

impl<K: Changing> ChangedKeys<K> {
    /// Queues `key` unless it is queued already.
    pub fn mark(&mut self, key: ObjectRef<K>) {
        if self.queued.insert(key.clone()) {
            self.order.push_back(key);
        }
    }

    /// The Job that changed first.
    pub fn take(&mut self) -> Option<ObjectRef<K>> {
        // Keys removed meanwhile are skipped.
        while let Some(key) = self.order.pop_front() {
            if self.queued.remove(&key) {
                return Some(key);
            }
        }
        None
    }

    /// Unqueues `key`; whether it was queued.
    pub fn remove(&mut self, key: &ObjectRef<K>) -> bool {
        self.queued.remove(key)
    }

    pub fn contains(&self, key: &ObjectRef<K>) -> bool {
        self.queued.contains(key)
    }

    pub fn len(&self) -> usize {
        self.queued.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }
}

/// The keys a watch event marks changed: the object it applied, or, at the
/// end of a (re)list, every Job the cache holds.
pub fn changed_keys<K: Changing>(
    event: &Event<K>,
    cached: impl FnOnce() -> Vec<ObjectRef<K>>,
) -> Vec<ObjectRef<K>> {
    match event {
        Event::Apply(job) => vec![ObjectRef::from_obj(job)],
        Event::InitDone => cached(),
        Event::Init | Event::InitApply(_) | Event::Delete(_) => Vec::new(),
    }
}

/// One controller's set and what wakes it.
#[derive(Debug)]
struct Subscriber<K: Changing> {
    pending: Mutex<ChangedKeys<K>>,
    changed: Notify,
}

/// Every controller's set; the watch of the kind marks them all.
#[derive(Debug, Clone)]
pub struct ChangeFeed<K: Changing> {
    subscribers: Arc<Mutex<Vec<Arc<Subscriber<K>>>>>,
}

impl<K: Changing> Default for ChangeFeed<K> {
    fn default() -> Self {
        ChangeFeed {
            subscribers: Arc::default(),
        }
    }
}

impl<K: Changing> ChangeFeed<K> {
    /// Marks `keys` changed for every subscriber.
    pub fn mark(&self, keys: Vec<ObjectRef<K>>) {
        if keys.is_empty() {
            return;
        }
        for subscriber in self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            let mut pending = subscriber
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for key in &keys {
                pending.mark(key.clone());
            }
            drop(pending);
            subscriber.changed.notify_one();
        }
    }

    /// A new set, marked from now on; its stream yields each changed Job that
    /// `jobs` still holds.
    pub fn subscribe(&self, jobs: Store<K>) -> impl Stream<Item = Arc<K>> + Send + 'static {
        let subscriber = Arc::new(Subscriber {
            pending: Mutex::new(ChangedKeys::default()),
            changed: Notify::new(),
        });
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&subscriber));
        futures::stream::unfold((subscriber, jobs), |(subscriber, jobs)| async move {
            loop {
                let next = subscriber
                    .pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                match next {
                    Some(key) => {
                        if let Some(job) = jobs.get(&key) {
                            return Some((job, (subscriber, jobs)));
                        }
                    }
                    None => subscriber.changed.notified().await,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use kube::runtime::reflector;

    use super::*;
    use k8s_openapi::api::batch::v1::Job;

    fn job(name: &str) -> Job {
        let mut job = Job::default();
        job.metadata.name = Some(name.into());
        job.metadata.namespace = Some("ns".into());
        job
    }

    #[test]
    fn a_job_changed_twice_is_queued_once_in_the_order_it_first_changed() {
        let mut pending = ChangedKeys::default();
        for name in ["a", "b", "a"] {
            pending.mark(ObjectRef::from_obj(&job(name)));
        }
        assert_eq!(pending.len(), 2);
        assert_eq!(pending.take().map(|k| k.name), Some("a".into()));
        assert_eq!(pending.take().map(|k| k.name), Some("b".into()));
        assert!(pending.is_empty());
    }

    #[test]
    fn a_removed_job_is_skipped_until_marked_again() {
        let mut pending = ChangedKeys::default();
        let [a, b] = ["a", "b"].map(|name| ObjectRef::from_obj(&job(name)));
        pending.mark(a.clone());
        pending.mark(b.clone());
        assert!(pending.remove(&a));
        assert!(!pending.remove(&a));
        assert!(!pending.contains(&a));
        assert_eq!(pending.len(), 1);
        assert_eq!(pending.take(), Some(b.clone()));
        assert_eq!(pending.take(), None);
        pending.mark(a.clone());
        assert_eq!(pending.take(), Some(a));
    }

    #[test]
    fn an_apply_marks_its_job_and_the_end_of_a_list_marks_every_cached_job() {
        let a = job("a");
        let all = || {
            vec![
                ObjectRef::from_obj(&job("x")),
                ObjectRef::from_obj(&job("y")),
            ]
        };
        assert_eq!(
            changed_keys(&Event::Apply(a.clone()), all),
            vec![ObjectRef::from_obj(&a)]
        );
        assert_eq!(changed_keys(&Event::InitDone, all).len(), 2);
        assert!(changed_keys(&Event::Delete(a.clone()), all).is_empty());
        assert!(changed_keys(&Event::InitApply(a), all).is_empty());
    }

    #[tokio::test]
    async fn a_job_deleted_before_its_turn_is_skipped_not_waited_on() {
        let (reader, mut writer) = reflector::store::<Job>();
        let changes = ChangeFeed::default();
        let mut stream = Box::pin(changes.subscribe(reader));
        writer.apply_watcher_event(&Event::Apply(job("kept")));
        changes.mark(vec![
            ObjectRef::from_obj(&job("gone")),
            ObjectRef::from_obj(&job("kept")),
        ]);
        let next = tokio::time::timeout(std::time::Duration::from_secs(5), stream.next())
            .await
            .expect("the kept Job comes through");
        assert_eq!(
            next.and_then(|j| j.metadata.name.clone()),
            Some("kept".into())
        );
    }
}
