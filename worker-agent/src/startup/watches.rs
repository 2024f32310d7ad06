//! The agent's watches of its worker, started before its sessions: the
//! caches of this origin's mirrors and their Pods, the kinds the worker
//! serves, the worker's Warning Events about the mirrors, and the room's
//! watches — each within the namespace policy where it concerns mirrors.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use jobrelay_kinds::jobset::JobSet;
use jobrelay_process::Tasks;
use jobrelay_proto::kinds::KindName;
use jobrelay_proto::v1::AgentMessage;
use jobrelay_proto::wire::ORIGIN_LABEL;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tracing::info;

use crate::cli::Args;
use crate::error::Error;
use crate::kinds::MirrorKind;
use crate::kinds::objects::Objects;
use crate::metrics::Metrics;
use crate::namespaces::NamespacePolicy;
use crate::watched::{Changes, Watched};
use crate::{initial_list, pod_summary, room, scoped_watch, worker_events};

/// The caches of this origin's mirrors (of every kind the worker serves)
/// and their Pods, within the namespace policy.
pub(crate) struct WatchedMirrors {
    pub(super) objects: Objects,
    pub(super) pods: Watched<Pod>,
    pub(super) changes: Arc<Changes>,
    pub(super) policy: Arc<NamespacePolicy>,
    /// The caches' readers, to tell whose a worker's Event is.
    owners: worker_events::Owners,
}

/// The watched mirrors, and the watches that fill them (ending only if a
/// watch does).
pub(crate) fn watch_mirrors(
    client: &kube::Client,
    origin: &str,
    policy: Arc<NamespacePolicy>,
    served: &[KindName],
) -> (WatchedMirrors, BoxFuture<'static, ()>) {
    let changes = Arc::new(Changes::default());
    let selector = watcher::Config::default()
        .labels(&format!("{ORIGIN_LABEL}={origin}"))
        .timeout(jobrelay_process::WATCH_TIMEOUT_SECS);
    let scope = policy.watched();
    let (jobs, job_watch) = Watched::new(
        watch_within::<Job>(client, scope.as_deref(), &selector)
            .modify(jobrelay_process::cache::trim)
            .modify(Job::keep_what_is_reported),
        Arc::clone(&changes),
    );
    let (pods, pod_watch) = Watched::new(
        watch_within::<Pod>(client, scope.as_deref(), &selector)
            .modify(pod_summary::keep_what_is_read),
        Arc::clone(&changes),
    );
    let mut watches: Vec<BoxFuture<'static, ()>> = vec![Box::pin(job_watch), Box::pin(pod_watch)];
    let jobsets = served.contains(&JobSet::NAME).then(|| {
        let (jobsets, jobset_watch) = Watched::new(
            watch_within::<JobSet>(client, scope.as_deref(), &selector)
                .modify(jobrelay_process::cache::trim)
                .modify(JobSet::keep_what_is_reported),
            Arc::clone(&changes),
        );
        watches.push(Box::pin(jobset_watch));
        jobsets
    });
    let watching = Box::pin(async move {
        futures::future::select_all(watches).await;
    });
    let owners = worker_events::Owners {
        pods: pods.store(),
        jobs: jobs.store(),
        jobsets: jobsets.as_ref().map(Watched::store),
    };
    let watched = WatchedMirrors {
        owners,
        objects: Objects::new(jobs, jobsets),
        pods,
        changes,
        policy,
    };
    (watched, watching)
}

/// The kinds besides Jobs the worker serves, so the agent mirrors them: a
/// JobSet only where its CRD is installed. Read once at start; an agent
/// started before the CRD was installed is restarted to mirror JobSets.
pub(crate) async fn served_kinds(client: &kube::Client) -> Result<Vec<KindName>, Error> {
    let served = jobrelay_kinds::jobset::served(client)
        .await
        .map_err(Error::Discovery)?;
    let kind = JobSet::NAME;
    match served {
        true => info!(%kind, "the worker serves JobSets; mirroring them"),
        false => info!(%kind, "the worker does not serve JobSets; not mirroring them"),
    }
    Ok(served.then_some(kind).into_iter().collect())
}

/// The worker's Warning Events about this origin's mirrors and their Pods,
/// from a watch of them within the namespace policy, for the sessions to
/// tell; none with `--worker-events=false`.
pub(crate) fn watch_warnings(
    args: &Args,
    client: &kube::Client,
    watched: &WatchedMirrors,
    tasks: &Tasks,
) -> Option<mpsc::Receiver<AgentMessage>> {
    if !args.worker_events {
        info!("worker Events are not told to the manager (--worker-events=false)");
        return None;
    }
    let warnings = watcher::Config::default()
        .fields(worker_events::WARNINGS)
        .timeout(jobrelay_process::WATCH_TIMEOUT_SECS);
    let scope = watched.policy.watched();
    let events = watch_within::<CoreEvent>(client, scope.as_deref(), &warnings).default_backoff();
    let (told, telling) = mpsc::channel(worker_events::QUEUED);
    tasks.spawn(worker_events::run(events, watched.owners.clone(), told));
    Some(telling)
}

/// The room every session reports, from the room's watches; none with
/// `--room=false`.
pub(crate) fn watch_room(
    args: &Args,
    client: &kube::Client,
    metrics: &Metrics,
    tasks: &Tasks,
) -> Option<room::Feed> {
    if !args.room {
        info!(
            "room reports are off (--room=false): the manager places on this cluster without asking whether Pods fit"
        );
        return None;
    }
    let room_metrics = metrics.room();
    Some(room::Feed {
        room: room::watch(client, &room_metrics, args.room_kueue, tasks),
        interval: args.room_interval,
        sent: room_metrics.reports,
    })
}

/// The watch of this origin's `K`s: cluster-wide, or in each of
/// `namespaces` (merged) where the policy names them.
fn watch_within<K>(
    client: &kube::Client,
    namespaces: Option<&[String]>,
    selector: &watcher::Config,
) -> BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Default
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    match namespaces {
        None => initial_list::watch(Api::<K>::all(client.clone()), selector.clone()).boxed(),
        Some(namespaces) => scoped_watch::merged(
            namespaces
                .iter()
                .map(|namespace| {
                    initial_list::watch(
                        Api::<K>::namespaced(client.clone(), namespace),
                        selector.clone(),
                    )
                })
                .collect(),
        ),
    }
}
