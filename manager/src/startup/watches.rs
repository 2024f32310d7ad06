//! The manager's watches: Jobs (feeding the two Job controllers' change
//! sets, and ending a Job's Event series when it goes), WorkerClusters and
//! Namespaces, each a cache fed by a task of its own.

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

use super::controllers::Inputs;
use crate::caches::{all_synced, cache};
use crate::clusters::registry::Registry;
use crate::clusters::worker_cluster::WorkerCluster;
use crate::controller::changes::{self, JobChanges};
use crate::kinds::key::Key;
use crate::kinds::stores::Stores;
use crate::telemetry::events::Events;
use jobrelay_process::cache::trim;

pub(super) struct Watches {
    pub jobs: Store<Job>,
    /// The Jobs that changed, for the Job controller and the status copy
    /// (one key per Job, kept while this replica follows).
    pub mirror_changes: BoxStream<'static, Arc<Job>>,
    pub status_changes: BoxStream<'static, Arc<Job>>,
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
            jobs: self.jobs.clone(),
            jobsets: None,
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
            mirror_changes: self.mirror_changes,
            status_changes: self.status_changes,
            triggered,
            triggers,
        }
    }

    pub(super) fn start(
        client: &kube::Client,
        worker_clusters: Api<WorkerCluster>,
        events: &Events,
        tasks: &Tasks,
    ) -> Watches {
        let (jobs, job_writer) = reflector::store::<Job>();
        let job_changes = JobChanges::default();
        let [mirror_changes, status_changes] =
            [(); 2].map(|()| job_changes.subscribe(jobs.clone()).boxed());
        let marked = jobs.clone();
        let published = events.clone();
        let jobs_synced = cache(
            Api::<Job>::all(client.clone()),
            crate::job::life::for_cache,
            job_writer,
            move |event| {
                if let watcher::Event::Delete(job) = event
                    && let Some(uid) = &job.metadata.uid
                {
                    published.forget(uid);
                }
                job_changes.mark(changes::changed_keys(event, || {
                    marked
                        .state()
                        .iter()
                        .map(|job| ObjectRef::from_obj(&**job))
                        .collect()
                }));
            },
            tasks,
        );
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
        Watches {
            registry: Registry {
                clusters: clusters.clone(),
                namespaces,
            },
            jobs,
            mirror_changes,
            status_changes,
            clusters,
            clusters_changed,
            synced: all_synced([jobs_synced, clusters_synced, namespaces_synced]),
        }
    }
}
