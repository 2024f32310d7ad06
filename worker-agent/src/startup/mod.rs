//! What `jobrelay-agent` does before its sessions, step by step: flags
//! checked, the manager's address and CA, the metrics endpoint, the
//! configuration and namespace policy, the terminated-Pods pass, the
//! watches of the worker (`watches.rs`), and the agent that holds them.

mod watches;

pub(crate) use watches::{WatchedMirrors, served_kinds, watch_mirrors, watch_room, watch_warnings};

use std::sync::Arc;
use std::time::Duration;

use jobrelay_process::Tasks;
use jobrelay_process::health::Readiness;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

use crate::cli::Args;
use crate::config::{Config, TerminatedPods};
use crate::deletion_pace::DeletionPace;
use crate::dial::Dial;
use crate::error::Error;
use crate::logs::Logs;
use crate::metrics::Metrics;
use crate::mirrors::{BrakeSettings, Mirrors, Pacing};
use crate::namespaces::NamespacePolicy;
use crate::session::Agent;
use crate::stuck_pods::{self, HeldPods};
use crate::terminated_pods;

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

/// The agent, holding the mirrors and serving their Pods' logs.
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
    let logs = Logs::new(
        client.clone(),
        args.cluster.clone(),
        watched.objects.clone(),
        watched.pods.clone(),
        metrics.logs(),
    );
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
        logs,
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
