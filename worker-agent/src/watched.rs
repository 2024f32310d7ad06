//! The agent's watch caches, looked up by origin UID, and what changed since
//! the last pass.
//!
//! The objects themselves live in kube-runtime's stores. Beside each store an
//! index says which objects carry each origin UID, and every watch event
//! marks its origin UID changed, so a pass of the agent looks at the mirrors
//! that changed, not at every mirror it holds. A relist, which can drop
//! objects without a delete event, marks everything changed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use futures::{Stream, StreamExt};
use jobrelay_proto::wire::ORIGIN_UID_LABEL;
use kube::Resource;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use tokio::sync::Notify;

/// The origin UID an object carries, if any.
pub fn origin_uid(meta: &kube::api::ObjectMeta) -> Option<String> {
    meta.labels.as_ref()?.get(ORIGIN_UID_LABEL).cloned()
}

/// Which objects carry each origin UID, kept from watch events.
#[derive(Debug)]
pub struct ByOrigin<K: Resource<DynamicType = ()>> {
    origins: HashMap<String, HashSet<ObjectRef<K>>>,
    of: HashMap<ObjectRef<K>, String>,
    /// Filled during a relist, swapped in when it is done.
    relisting: Option<Box<ByOrigin<K>>>,
}

/// What one watch event touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// These origin UIDs (none for an object without one).
    Origins(Vec<String>),
    /// A relist ended: anything may have changed.
    Everything,
}

impl<K: Resource<DynamicType = ()>> Default for ByOrigin<K> {
    fn default() -> Self {
        ByOrigin {
            origins: HashMap::new(),
            of: HashMap::new(),
            relisting: None,
        }
    }
}

impl<K: Resource<DynamicType = ()>> ByOrigin<K> {
    /// Takes one watch event; says which origin UIDs it touched.
    pub fn apply(&mut self, event: &Event<K>) -> Touched {
        match event {
            Event::Apply(object) => Touched::Origins(self.put(object)),
            Event::Delete(object) => Touched::Origins(self.remove(&ObjectRef::from_obj(object))),
            Event::Init => {
                self.relisting = Some(Box::default());
                Touched::Origins(Vec::new())
            }
            Event::InitApply(object) => {
                self.relisting.get_or_insert_with(Box::default).put(object);
                Touched::Origins(Vec::new())
            }
            Event::InitDone => {
                if let Some(listed) = self.relisting.take() {
                    *self = *listed;
                }
                Touched::Everything
            }
        }
    }

    /// The objects of `uid`.
    pub fn refs(&self, uid: &str) -> impl Iterator<Item = &ObjectRef<K>> {
        self.origins.get(uid).into_iter().flatten()
    }

    fn put(&mut self, object: &K) -> Vec<String> {
        let key = ObjectRef::from_obj(object);
        let uid = origin_uid(object.meta());
        if self.of.get(&key) == uid.as_ref() {
            return uid.into_iter().collect();
        }
        let mut touched = self.remove(&key);
        if let Some(uid) = uid {
            self.origins
                .entry(uid.clone())
                .or_default()
                .insert(key.clone());
            self.of.insert(key, uid.clone());
            touched.push(uid);
        }
        touched
    }

    fn remove(&mut self, key: &ObjectRef<K>) -> Vec<String> {
        let Some(uid) = self.of.remove(key) else {
            return Vec::new();
        };
        if let Some(refs) = self.origins.get_mut(&uid) {
            refs.remove(key);
            if refs.is_empty() {
                self.origins.remove(&uid);
            }
        }
        vec![uid]
    }
}

/// Origin UIDs changed since the last pass took them.
#[derive(Debug, Default)]
pub struct Changed {
    pub uids: HashSet<String>,
    /// Look at everything (a relist ended).
    pub everything: bool,
}

/// Shared by the watches (which mark) and the agent's passes (which take).
#[derive(Debug, Default)]
pub struct Changes {
    changed: Mutex<Changed>,
    notify: Notify,
}

impl Changes {
    pub fn mark(&self, touched: Touched) {
        {
            let mut changed = self.changed.lock().unwrap_or_else(PoisonError::into_inner);
            match touched {
                Touched::Origins(uids) if uids.is_empty() => return,
                Touched::Origins(uids) => changed.uids.extend(uids),
                Touched::Everything => changed.everything = true,
            }
        }
        self.notify.notify_one();
    }

    /// What changed since the last call.
    pub fn take(&self) -> Changed {
        std::mem::take(&mut *self.changed.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Resolves once something was marked since the last wake-up.
    pub async fn notified(&self) {
        self.notify.notified().await;
    }
}

/// One kind of object the agent watches: the store and its index.
pub struct Watched<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    index: Arc<Mutex<ByOrigin<K>>>,
}

/// Another reader of the same cache and index, for another task.
impl<K: Resource<DynamicType = ()> + 'static> Clone for Watched<K> {
    fn clone(&self) -> Self {
        Watched {
            store: self.store.clone(),
            index: Arc::clone(&self.index),
        }
    }
}

impl<K> Watched<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// Starts caching what `events` shows; the returned future drives the
    /// watch (retrying with backoff) and marks each change in `changes`.
    pub fn new<S>(
        events: S,
        changes: Arc<Changes>,
    ) -> (Self, impl Future<Output = ()> + Send + use<K, S>)
    where
        K: Send + Sync,
        S: Stream<Item = Result<Event<K>, watcher::Error>> + Send,
    {
        let (store, writer) = kube::runtime::reflector::store::<K>();
        let index = Arc::new(Mutex::new(ByOrigin::default()));
        let indexed = Arc::clone(&index);
        let drive = kube::runtime::reflector::reflector(writer, events)
            .default_backoff()
            .for_each(move |event| {
                match event {
                    Ok(event) => {
                        let touched = indexed
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .apply(&event);
                        changes.mark(touched);
                    }
                    Err(error) => tracing::warn!(%error, "watch error; retrying"),
                }
                futures::future::ready(())
            });
        (Watched { store, index }, drive)
    }

    pub async fn wait_until_ready(&self) {
        let _ = self.store.wait_until_ready().await;
    }

    /// A reader of the cache, for another task.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Every object cached.
    pub fn state(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    /// The cached objects of each of `uids` that has any.
    pub fn of<'a>(
        &self,
        uids: impl IntoIterator<Item = &'a String>,
    ) -> HashMap<String, Vec<Arc<K>>> {
        let index = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        let mut held = HashMap::new();
        for uid in uids {
            let objects: Vec<Arc<K>> = index
                .refs(uid)
                .filter_map(|key| self.store.get(key))
                .collect();
            if !objects.is_empty() {
                held.insert(uid.clone(), objects);
            }
        }
        held
    }
}

#[cfg(test)]
/// A cache that listed `objects` once.
pub(crate) async fn listed<K>(objects: Vec<K>, changes: &Arc<Changes>) -> Watched<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let events = std::iter::once(Event::Init)
        .chain(objects.into_iter().map(Event::InitApply))
        .chain(std::iter::once(Event::InitDone))
        .map(Ok);
    let (watched, drive) = Watched::new(futures::stream::iter(events), Arc::clone(changes));
    drive.await;
    watched
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    impl<K: Resource<DynamicType = ()>> ByOrigin<K> {
        /// Every origin UID some object carries.
        fn origins(&self) -> impl Iterator<Item = &String> {
            self.origins.keys()
        }
    }

    fn pod(name: &str, origin: Option<&str>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.into());
        pod.metadata.namespace = Some("ml".into());
        if let Some(origin) = origin {
            pod.metadata.labels = Some([(ORIGIN_UID_LABEL.to_string(), origin.to_string())].into());
        }
        pod
    }

    fn names(index: &ByOrigin<Pod>, uid: &str) -> Vec<String> {
        let mut names: Vec<String> = index.refs(uid).map(|r| r.name.clone()).collect();
        names.sort();
        names
    }

    fn touched(uids: &[&str]) -> Touched {
        Touched::Origins(uids.iter().map(|u| u.to_string()).collect())
    }

    #[test]
    fn an_applied_object_is_found_under_its_origin_uid_and_touches_it() {
        let mut index = ByOrigin::default();
        assert_eq!(
            index.apply(&Event::Apply(pod("a", Some("u1")))),
            touched(&["u1"])
        );
        assert_eq!(
            index.apply(&Event::Apply(pod("b", Some("u1")))),
            touched(&["u1"])
        );
        assert_eq!(
            index.apply(&Event::Apply(pod("a", Some("u1")))),
            touched(&["u1"]),
            "a modification touches it again"
        );
        assert_eq!(names(&index, "u1"), ["a", "b"]);
    }

    #[test]
    fn an_object_without_an_origin_uid_touches_nothing() {
        let mut index = ByOrigin::default();
        assert_eq!(index.apply(&Event::Apply(pod("a", None))), touched(&[]));
        assert_eq!(index.origins().count(), 0);
    }

    #[test]
    fn a_deleted_object_leaves_its_origin_uid_and_touches_it() {
        let mut index = ByOrigin::default();
        index.apply(&Event::Apply(pod("a", Some("u1"))));
        assert_eq!(
            index.apply(&Event::Delete(pod("a", Some("u1")))),
            touched(&["u1"])
        );
        assert!(names(&index, "u1").is_empty());
        assert_eq!(
            index.origins().count(),
            0,
            "an origin UID with nothing left is forgotten"
        );
        assert_eq!(
            index.apply(&Event::Delete(pod("a", Some("u1")))),
            touched(&[]),
            "unknown: nothing"
        );
    }

    #[test]
    fn an_object_relabelled_moves_and_touches_both_origin_uids() {
        let mut index = ByOrigin::default();
        index.apply(&Event::Apply(pod("a", Some("u1"))));
        assert_eq!(
            index.apply(&Event::Apply(pod("a", Some("u2")))),
            touched(&["u1", "u2"])
        );
        assert!(names(&index, "u1").is_empty());
        assert_eq!(names(&index, "u2"), ["a"]);
        assert_eq!(
            index.apply(&Event::Apply(pod("a", None))),
            touched(&["u2"]),
            "label removed"
        );
        assert_eq!(index.origins().count(), 0);
    }

    #[test]
    fn a_relist_replaces_everything_when_done_and_touches_everything() {
        let mut index = ByOrigin::default();
        index.apply(&Event::Apply(pod("gone", Some("u1"))));
        assert_eq!(index.apply(&Event::Init), touched(&[]));
        assert_eq!(
            index.apply(&Event::InitApply(pod("kept", Some("u2")))),
            touched(&[])
        );
        assert_eq!(
            names(&index, "u1"),
            ["gone"],
            "the old view holds until the relist is done"
        );
        assert_eq!(index.apply(&Event::InitDone), Touched::Everything);
        assert!(
            names(&index, "u1").is_empty(),
            "an object not relisted is dropped"
        );
        assert_eq!(names(&index, "u2"), ["kept"]);
    }

    #[test]
    fn changes_are_taken_once() {
        let changes = Changes::default();
        changes.mark(touched(&["u1"]));
        changes.mark(touched(&["u2", "u1"]));
        let taken = changes.take();
        assert_eq!(
            taken.uids,
            HashSet::from(["u1".to_string(), "u2".to_string()])
        );
        assert!(!taken.everything);
        changes.mark(Touched::Everything);
        assert!(changes.take().everything);
        let again = changes.take();
        assert!(again.uids.is_empty() && !again.everything);
    }
}
