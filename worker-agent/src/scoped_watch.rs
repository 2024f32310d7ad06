//! One watch made of several: where the namespace policy names the
//! namespaces, the agent may read only there (the chart grants it Roles in
//! them, no ClusterRole), so it watches each and merges them into the one
//! stream its caches take.
//!
//! A cache takes one initial list (`Init`, `InitApply`…, `InitDone`), then
//! changes. Several namespaces' lists arrive interleaved, each with its own
//! `InitDone`, and a namespace relists on its own later. So the merge holds
//! every namespace's objects until all have listed, then gives them as one
//! list; after that, a namespace's relist becomes changes: what it lists
//! as `Apply`, and what it no longer lists as `Delete`.

use std::collections::HashMap;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, stream};
use kube::Resource;
use kube::api::ObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;

/// The events of `watches`, merged as one watch of all their objects.
pub fn merged<K, E, S>(watches: Vec<S>) -> BoxStream<'static, Result<Event<K>, E>>
where
    K: Resource<DynamicType = ()> + Clone + Default + Send + 'static,
    E: Send + 'static,
    S: Stream<Item = Result<Event<K>, E>> + Send + 'static,
{
    if watches.is_empty() {
        // No namespace: an empty list, then nothing ever.
        let listed = [Ok(Event::Init), Ok(Event::InitDone)];
        return stream::iter(listed).chain(stream::pending()).boxed();
    }
    let mut merge = Merge::new(watches.len());
    let tagged = stream::select_all(
        watches
            .into_iter()
            .enumerate()
            .map(|(index, watch)| watch.map(move |item| (index, item)).boxed()),
    );
    tagged
        .flat_map(move |(index, item)| stream::iter(merge.step(index, item)))
        .boxed()
}

/// The merge's state: plain data, one step per event.
struct Merge<K: Resource<DynamicType = ()>> {
    /// Until every watch has listed: each one's objects, whole.
    pending: Vec<HashMap<ObjectRef<K>, K>>,
    listed: Vec<bool>,
    /// After: each watch's objects (their metadata, enough to delete them
    /// from a cache), and the refs of a relist under way.
    known: Vec<HashMap<ObjectRef<K>, ObjectMeta>>,
    relisting: Vec<Option<Vec<ObjectRef<K>>>>,
    started: bool,
}

impl<K: Resource<DynamicType = ()> + Clone + Default> Merge<K> {
    fn new(watches: usize) -> Self {
        Merge {
            pending: (0..watches).map(|_| HashMap::new()).collect(),
            listed: vec![false; watches],
            known: (0..watches).map(|_| HashMap::new()).collect(),
            relisting: (0..watches).map(|_| None).collect(),
            started: false,
        }
    }

    fn step<E>(&mut self, index: usize, item: Result<Event<K>, E>) -> Vec<Result<Event<K>, E>> {
        let event = match item {
            Ok(event) => event,
            Err(error) => return vec![Err(error)],
        };
        match self.started {
            false => self.before_start(index, event),
            true => self.after_start(index, event),
        }
        .into_iter()
        .map(Ok)
        .collect()
    }

    /// Until every watch has listed once: collect, then give one list.
    fn before_start(&mut self, index: usize, event: Event<K>) -> Vec<Event<K>> {
        let pending = &mut self.pending[index];
        match event {
            Event::Init => pending.clear(),
            Event::InitApply(object) | Event::Apply(object) => {
                pending.insert(ObjectRef::from_obj(&object), object);
            }
            Event::Delete(object) => {
                pending.remove(&ObjectRef::from_obj(&object));
            }
            Event::InitDone => self.listed[index] = true,
        }
        if !self.listed.iter().all(|&listed| listed) {
            return Vec::new();
        }
        self.started = true;
        let mut out = vec![Event::Init];
        for (watch, pending) in self.pending.iter_mut().enumerate() {
            for (reference, object) in pending.drain() {
                self.known[watch].insert(reference, object.meta().clone());
                out.push(Event::InitApply(object));
            }
        }
        out.push(Event::InitDone);
        out
    }

    /// Changes pass through; a watch's relist turns into changes.
    fn after_start(&mut self, index: usize, event: Event<K>) -> Vec<Event<K>> {
        let known = &mut self.known[index];
        match event {
            Event::Init => {
                self.relisting[index] = Some(Vec::new());
                Vec::new()
            }
            Event::InitApply(object) => {
                let reference = ObjectRef::from_obj(&object);
                known.insert(reference.clone(), object.meta().clone());
                self.relisting[index]
                    .get_or_insert_with(Vec::new)
                    .push(reference);
                vec![Event::Apply(object)]
            }
            Event::InitDone => {
                let listed = self.relisting[index].take().unwrap_or_default();
                let gone: Vec<ObjectRef<K>> = known
                    .keys()
                    .filter(|reference| !listed.contains(reference))
                    .cloned()
                    .collect();
                gone.into_iter()
                    .filter_map(|reference| known.remove(&reference))
                    .map(|meta| {
                        let mut object = K::default();
                        *object.meta_mut() = meta;
                        Event::Delete(object)
                    })
                    .collect()
            }
            Event::Apply(object) => {
                known.insert(ObjectRef::from_obj(&object), object.meta().clone());
                vec![Event::Apply(object)]
            }
            Event::Delete(object) => {
                known.remove(&ObjectRef::from_obj(&object));
                vec![Event::Delete(object)]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;

    fn job(namespace: &str, name: &str) -> Job {
        let mut job = Job::default();
        job.metadata.namespace = Some(namespace.into());
        job.metadata.name = Some(name.into());
        job
    }

    /// Events as `kind ns/name` lines.
    fn seen(events: Vec<Result<Event<Job>, String>>) -> Vec<String> {
        events
            .into_iter()
            .map(|item| match item {
                Err(error) => format!("error {error}"),
                Ok(Event::Init) => "Init".into(),
                Ok(Event::InitDone) => "InitDone".into(),
                Ok(Event::InitApply(j)) => format!("InitApply {}", key(&j)),
                Ok(Event::Apply(j)) => format!("Apply {}", key(&j)),
                Ok(Event::Delete(j)) => format!("Delete {}", key(&j)),
            })
            .collect()
    }

    fn key(job: &Job) -> String {
        format!(
            "{}/{}",
            job.metadata.namespace.as_deref().unwrap_or(""),
            job.metadata.name.as_deref().unwrap_or("")
        )
    }

    fn run(merge: &mut Merge<Job>, steps: Vec<(usize, Event<Job>)>) -> Vec<String> {
        let out = steps
            .into_iter()
            .flat_map(|(index, event)| merge.step::<String>(index, Ok(event)))
            .collect();
        seen(out)
    }

    #[test]
    fn one_list_is_given_once_every_namespace_has_listed() {
        let mut merge = Merge::new(2);
        let before = run(
            &mut merge,
            vec![
                (0, Event::Init),
                (0, Event::InitApply(job("a", "x"))),
                (0, Event::InitDone),
                (0, Event::Apply(job("a", "y"))),
                (1, Event::Init),
                (1, Event::InitApply(job("b", "z"))),
            ],
        );
        assert!(before.is_empty(), "nothing until b has listed: {before:?}");
        let mut listed = run(&mut merge, vec![(1, Event::InitDone)]);
        listed[1..3].sort();
        assert_eq!(
            listed,
            [
                "Init",
                "InitApply a/x",
                "InitApply a/y",
                "InitApply b/z",
                "InitDone"
            ]
        );
    }

    #[test]
    fn a_namespaces_relist_becomes_changes_with_deletes_for_what_it_lost() {
        let mut merge = Merge::new(2);
        run(
            &mut merge,
            vec![
                (0, Event::InitApply(job("a", "x"))),
                (0, Event::InitApply(job("a", "gone"))),
                (0, Event::InitDone),
                (1, Event::InitApply(job("b", "z"))),
                (1, Event::InitDone),
            ],
        );
        let relisted = run(
            &mut merge,
            vec![
                (0, Event::Init),
                (0, Event::InitApply(job("a", "x"))),
                (0, Event::InitDone),
            ],
        );
        assert_eq!(
            relisted,
            ["Apply a/x", "Delete a/gone"],
            "b's z is untouched"
        );
        let changes = run(
            &mut merge,
            vec![
                (1, Event::Delete(job("b", "z"))),
                (1, Event::Apply(job("b", "w"))),
            ],
        );
        assert_eq!(changes, ["Delete b/z", "Apply b/w"]);
    }

    #[test]
    fn errors_pass_through_at_once() {
        let mut merge: Merge<Job> = Merge::new(1);
        let out = merge.step(0, Err("watch failed".to_string()));
        assert_eq!(seen(out), ["error watch failed"]);
    }

    #[test]
    fn no_namespace_lists_at_once() {
        let mut merge: Merge<Job> = Merge::new(1);
        assert_eq!(
            run(&mut merge, vec![(0, Event::Init), (0, Event::InitDone)]),
            ["Init", "InitDone"]
        );
    }
}
