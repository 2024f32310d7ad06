//! The manager's watches: Jobs, and JobSets where the manager cluster
//! serves them (each feeding its two controllers' change sets, and ending an
//! object's Event series when it goes), WorkerClusters and Namespaces, each
//! a cache fed by a task of its own.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use jobrelay_process::Tasks;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::{mpsc, watch};

use crate::caches::{all_synced, cache};
use crate::clusters::registry::Registry;
use crate::clusters::worker_cluster::WorkerCluster;
use crate::controller::changes::{self, ChangeFeed};
use crate::job::record::{self, Sealer};
use crate::kinds::Key;
use crate::kinds::RelayedKind;
use crate::kinds::demands::Demands;
use crate::kinds::stores::Stores;
use crate::telemetry::events::Events;
use jobrelay_kinds::jobset::JobSet;
use jobrelay_process::cache::trim;
use jobrelay_proto::kinds::KindName;

pub(super) struct Watches {
    /// Jobs: their cache and the changes of each of their two controllers
    /// (one key per Job, kept while this replica follows).
    pub jobs: KindWatch<Job>,
    /// JobSets, where the manager cluster serves them.
    pub jobsets: Option<KindWatch<JobSet>>,
    pub clusters: Store<WorkerCluster>,
    /// Ticks whenever a WorkerCluster changes.
    pub clusters_changed: watch::Receiver<()>,
    pub registry: Registry,
    /// True once every cache listed its objects.
    pub synced: watch::Receiver<bool>,
}

impl Watches {
    /// The caches of relayed objects, by kind.
    pub(super) fn stores(&self) -> Stores {
        Stores {
            jobs: self.jobs.objects.clone(),
            jobsets: self.jobsets.as_ref().map(|w| w.objects.clone()),
        }
    }

    /// What the controllers read of the watches (with the fleet's
    /// `triggered` Jobs and the `triggers` that wake them).
    pub(super) fn for_controllers(
        self,
        triggered: mpsc::UnboundedReceiver<Key>,
        triggers: mpsc::UnboundedSender<Key>,
    ) -> Inputs {
        Inputs {
            jobs: self.jobs,
            jobsets: self.jobsets,
            triggered,
            triggers,
        }
    }

    pub(super) fn start(
        client: &kube::Client,
        worker_clusters: Api<WorkerCluster>,
        served: &[KindName],
        events: &Events,
        demands: &Arc<Demands>,
        sealer: &Sealer,
        tasks: &Tasks,
    ) -> Watches {
        let jobs = KindWatch::<Job>::start(client, events, demands, sealer, tasks);
        let (clusters, cluster_writer) = reflector::store();
        let (cluster_changes, clusters_changed) = watch::channel(());
        let clusters_synced = cache(
            worker_clusters,
            trim,
            cluster_writer,
            move |_| cluster_changes.send_modify(|()| ()),
            tasks,
        );
        let (namespaces, namespace_writer) = reflector::store();
        let namespaces_synced = cache(
            Api::<Namespace>::all(client.clone()),
            trim,
            namespace_writer,
            |_| {},
            tasks,
        );
        let jobsets = served
            .contains(&JobSet::NAME)
            .then(|| KindWatch::<JobSet>::start(client, events, demands, sealer, tasks));
        let mut synced = vec![jobs.synced.clone(), clusters_synced, namespaces_synced];
        synced.extend(jobsets.as_ref().map(|w| w.synced.clone()));
        Watches {
            jobsets,
            registry: Registry {
                clusters: clusters.clone(),
                namespaces,
            },
            jobs,
            clusters,
            clusters_changed,
            synced: all_synced(synced),
        }
    }
}

/// What the controllers read of the watches, besides their `Context`.
pub(super) struct Inputs {
    pub jobs: KindWatch<Job>,
    /// JobSets, where the manager cluster serves them.
    pub jobsets: Option<KindWatch<JobSet>>,
    /// What agents reported, by object.
    pub triggered: mpsc::UnboundedReceiver<Key>,
    /// Wakes the Job controller for a Job (the admission check's way).
    pub triggers: mpsc::UnboundedSender<Key>,
}

/// The watch of one kind's relayed objects: its cache, and the changes each
/// of its two controllers reads.
pub(super) struct KindWatch<K: RelayedKind> {
    pub objects: Store<K>,
    pub mirror_changes: BoxStream<'static, Arc<K>>,
    pub status_changes: BoxStream<'static, Arc<K>>,
    synced: watch::Receiver<bool>,
}

impl<K: RelayedKind> KindWatch<K> {
    /// What each object's Pods ask is recorded in `demands` from the whole
    /// object, before the cache trims it; the cache keeps only the record
    /// of where it runs that jobrelay sealed ([`record::for_cache`]).
    fn start(
        client: &kube::Client,
        events: &Events,
        demands: &Arc<Demands>,
        sealer: &Sealer,
        tasks: &Tasks,
    ) -> KindWatch<K> {
        let (objects, writer) = reflector::store::<K>();
        let changes = ChangeFeed::default();
        let [mirror_changes, status_changes] =
            [(); 2].map(|()| changes.subscribe(objects.clone()).boxed());
        let marked = objects.clone();
        let published = events.clone();
        let (recorded, forgotten) = (Arc::clone(demands), Arc::clone(demands));
        let sealer = sealer.clone();
        let synced = cache(
            Api::<K>::all(client.clone()),
            move |object: &mut K| {
                recorded.record(object);
                record::for_cache(object, &sealer);
                object.for_cache();
            },
            writer,
            move |event| {
                if let watcher::Event::Delete(object) = event
                    && let Some(uid) = &object.meta().uid
                {
                    published.forget(uid);
                    forgotten.forget(uid);
                }
                changes.mark(changes::changed_keys(event, || {
                    marked
                        .state()
                        .iter()
                        .map(|object| ObjectRef::from_obj(&**object))
                        .collect()
                }));
            },
            tasks,
        );
        KindWatch {
            objects,
            mirror_changes,
            status_changes,
            synced,
        }
    }
}
