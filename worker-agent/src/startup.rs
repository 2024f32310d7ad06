//! What `jobrelay-agent` does before its sessions, step by step: flags
//! checked, the manager's address and CA, the metrics endpoint, the
//! configuration and namespace policy, the terminated-Pods pass, the watches
//! of this origin's mirrors and Pods, the room's watches, and the agent
//! that holds them.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use jobrelay_kinds::jobset::JobSet;
use jobrelay_process::Tasks;
use jobrelay_process::health::Readiness;
use jobrelay_proto::kinds::KindName;
use jobrelay_proto::v1::AgentMessage;
use jobrelay_proto::wire::ORIGIN_LABEL;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::info;

use crate::cli::Args;
use crate::config::{Config, TerminatedPods};
use crate::deletion_pace::DeletionPace;
use crate::dial::Dial;
use crate::error::Error;
use crate::kinds::MirrorKind;
use crate::kinds::objects::Objects;
use crate::metrics::Metrics;
use crate::mirrors::{BrakeSettings, Mirrors, Pacing};
use crate::namespaces::NamespacePolicy;
use crate::session::Agent;
use crate::stuck_pods::{self, HeldPods};
use crate::watched::{Changes, Watched};
use crate::{initial_list, pod_summary, room, scoped_watch, terminated_pods, worker_events};

/// How often the agent checks that its own API server answers.
const API_PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// The flags every agent needs.
pub(crate) fn check(args: &Args) -> Result<(), Error> {
    if args.origin.is_empty() {
        return Err(Error::NoOrigin);
    }
    if args.cluster.is_empty() {
        return Err(Error::NoCluster);
    }
    Ok(())
}

/// The manager's addresses, with its CA followed on disk unless plaintext.
pub(crate) fn dial(args: &Args) -> Result<Dial, Error> {
    let certificates = &args.process.certificates;
    let tls = match certificates.files(
        args.manager_ca.as_ref(),
        "--manager-ca",
        args.insecure_plaintext,
    )? {
        Some(files) => {
            let pem = files.read()?;
            Some(files.watch(pem, certificates.certificate_reload_interval))
        }
        None => None,
    };
    let mut dial = Dial::new(args.manager_url.clone(), tls);
    dial.check()?;
    Ok(dial)
}

/// Serves `/metrics` until the shutdown.
pub(crate) async fn serve_metrics(
    args: &Args,
    metrics: &Arc<Metrics>,
    tasks: &Tasks,
) -> Result<JoinHandle<std::io::Result<()>>, Error> {
    let listener = jobrelay_process::metrics_server::bind(args.metrics_listen).await?;
    let render = Arc::clone(metrics);
    Ok(tasks.spawn_to_end(jobrelay_process::metrics_server::serve(
        listener,
        Arc::new(move || render.render()),
        tasks.shutdown(),
    )))
}

/// The configuration file (defaults without one) and the namespace policy
/// it sets.
pub(crate) fn read_config(args: &Args) -> Result<(Config, Arc<NamespacePolicy>), Error> {
    let mut config = match &args.config {
        Some(path) => jobrelay_process::config_file::load(path, Config::parse)?,
        None => Config::default(),
    };
    info!(?config, "configuration");
    let policy = Arc::new(namespace_policy(&config, args.own_namespace.clone()));
    info!(namespaces = %policy.describe(), "namespace policy");
    // Where only named namespaces are open, finished Pods are looked for
    // there too, not cluster-wide.
    if let (Some(pods), Some(names)) = (config.terminated_pods.as_mut(), policy.watched())
        && pods.namespaces.is_empty()
    {
        pods.namespaces = names;
    }
    Ok((config, policy))
}

/// Starts the pass over terminated Pods where the configuration asks for
/// one, once its permissions are checked.
pub(crate) async fn clean_terminated_pods(
    client: &kube::Client,
    config: Config,
    origin: &str,
    deletions: &DeletionPace,
    tasks: &Tasks,
) -> Result<(), Error> {
    let Some(policy): Option<TerminatedPods> = config.terminated_pods else {
        return Ok(());
    };
    terminated_pods::check(client, &policy, origin).await?;
    tasks.spawn(terminated_pods::run(
        client.clone(),
        policy,
        origin.to_string(),
        deletions.clone(),
    ));
    Ok(())
}

/// The caches of this origin's mirrors (of every kind the worker serves)
/// and their Pods, within the namespace policy.
pub(crate) struct WatchedMirrors {
    objects: Objects,
    pods: Watched<Pod>,
    changes: Arc<Changes>,
    policy: Arc<NamespacePolicy>,
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

/// Follows the session's link for the metrics, and reports the agent ready
/// while a session is open and the worker's API server answers.
pub(crate) fn follow_link(
    metrics: &Arc<Metrics>,
    link_up: watch::Receiver<bool>,
    client: kube::Client,
    readiness: Readiness,
    tasks: &Tasks,
) {
    let sessions = Arc::clone(metrics);
    let session_state = link_up.clone();
    tasks.spawn(async move { sessions.follow_session(session_state).await });
    tasks.spawn(report_readiness(client, link_up, readiness));
}

/// The agent, holding the mirrors.
pub(crate) fn agent(
    args: &Args,
    dial: Dial,
    connected: watch::Sender<bool>,
    client: kube::Client,
    deletions: DeletionPace,
    watched: WatchedMirrors,
    metrics: &Metrics,
) -> Agent {
    let (deleting, held, foreign) = metrics.mirror_gauges();
    let pacing = Pacing {
        orphan_pod_grace: args.orphan_pod_grace,
        deletions,
        apply_retry_max: args.apply_retry_max_delay,
        brake: BrakeSettings {
            share: args.deletion_brake_share,
            at_least: args.deletion_brake_minimum,
            confirm: args.deletion_brake_confirm,
        },
    };
    let mirrors = Mirrors::new(
        client,
        args.origin.clone(),
        pacing,
        watched.objects,
        watched.pods,
        watched.changes,
    )
    .report_on(deleting, held, foreign)
    .within(watched.policy);
    Agent {
        dial,
        connected,
        desired_sets: metrics.desired_sets(),
        orphan_sweep_interval: args.orphan_sweep_interval,
        cluster: args.cluster.clone(),
        origin: args.origin.clone(),
        epochs: Default::default(),
        adopted_instance: args.adopt_manager_instance.clone(),
        mirrors,
        fence: watch::Sender::new(crate::fence::Clock::new(
            args.fence_after,
            std::time::Instant::now(),
        )),
        fenced: crate::session::Fenced::shown_on(metrics.fence()),
        room: None,
        terminating_pod_timeout: watch::Sender::new(None),
        worker_events: None,
    }
}

/// The namespace policy of the configuration file (every namespace when it
/// has none), never opening `own`.
fn namespace_policy(config: &Config, own: Option<String>) -> NamespacePolicy {
    match &config.namespaces {
        None => NamespacePolicy::everywhere(own),
        Some(namespaces) => NamespacePolicy {
            all: namespaces.all,
            names: namespaces.names.iter().cloned().collect(),
            selector: namespaces.selector.clone(),
            own,
        },
    }
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

/// Ready while a session is open and the worker's API server answers.
async fn report_readiness(
    client: kube::Client,
    mut link_up: watch::Receiver<bool>,
    readiness: Readiness,
) {
    let mut probes = tokio::time::interval(API_PROBE_INTERVAL);
    let mut api_up = false;
    let mut ready = None;
    loop {
        tokio::select! {
            _ = probes.tick() => {
                let answered = tokio::time::timeout(API_PROBE_INTERVAL, client.apiserver_version()).await;
                let up = matches!(answered, Ok(Ok(_)));
                if api_up && !up {
                    tracing::warn!("the worker's API server does not answer");
                }
                api_up = up;
            }
            changed = link_up.changed() => if changed.is_err() { return },
        }
        let now = api_up && *link_up.borrow();
        if ready != Some(now) {
            readiness.set(now).await;
            ready = Some(now);
        }
    }
}

/// Starts the sweep of this origin's Pods stuck Terminating on a node that
/// is not Ready; returns where the Welcome's `terminatingPodTimeout` goes,
/// and the Pods held so, for the mirrors' status.
pub(crate) fn sweep_stuck_pods(
    client: &kube::Client,
    watched: &WatchedMirrors,
    deletions: &DeletionPace,
    tasks: &Tasks,
) -> (
    watch::Sender<Option<Duration>>,
    watch::Receiver<Arc<HeldPods>>,
) {
    let (timeout, told) = watch::channel(None);
    let (held, holding) = watch::channel(Arc::default());
    let sweep = stuck_pods::Sweep {
        client: client.clone(),
        pods: watched.pods.store(),
        timeout: told,
        deletions: deletions.clone(),
        held,
        changes: Arc::clone(&watched.changes),
    };
    tasks.spawn(sweep.run());
    (timeout, holding)
}
