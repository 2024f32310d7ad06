//! jobrelay worker agent: runs in a worker cluster, dials the manager, applies
//! and deletes mirror Jobs, reports their status, and confirms every Pod gone.

pub mod budget;
pub mod cli;
pub mod config;
pub mod dial;
pub mod epoch;
pub mod error;
pub mod initial_list;
pub mod lost;
pub mod metrics;
pub mod mirrors;
pub mod namespaces;
pub mod report;
pub mod scoped_watch;
pub mod session;
pub mod teardown;
pub mod terminated_pods;
pub mod watched;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use jobrelay_process::Shutdown;
use jobrelay_process::health::Readiness;
use jobrelay_proto::wire::ORIGIN_LABEL;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tracing::info;

use crate::budget::Budget;
use crate::cli::Args;
use crate::config::Config;
use crate::dial::Dial;
pub use crate::error::Error;
use crate::metrics::Metrics;
use crate::mirrors::{BrakeSettings, Mirrors, Pacing};
use crate::namespaces::NamespacePolicy;
use crate::session::Agent;
use crate::watched::{Changes, Watched};

/// How often the agent checks that its own API server answers.
const API_PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// Runs the agent until SIGINT or SIGTERM.
pub async fn run(args: Args) -> Result<(), Error> {
    if args.origin.is_empty() {
        return Err(Error::NoOrigin);
    }
    if args.cluster.is_empty() {
        return Err(Error::NoCluster);
    }
    let kube_api_limit = args.process.kube_api.rate_limit()?;
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
    let shutdown = Shutdown::on_signals();
    let (readiness, health) =
        jobrelay_process::health::serve(args.process.health_listen, shutdown.clone()).await?;
    let metrics = Arc::new(Metrics::new());
    let metrics_listener = jobrelay_process::metrics_server::bind(args.metrics_listen).await?;
    let render = Arc::clone(&metrics);
    let mut metrics_server = tokio::spawn(jobrelay_process::metrics_server::serve(
        metrics_listener,
        Arc::new(move || render.render()),
        shutdown.clone(),
    ));

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
    let client =
        jobrelay_process::kube_client::client(args.process.kubeconfig.as_deref(), kube_api_limit)
            .await?;
    let deletions = Budget::per_second(args.deletions_per_second);
    let terminated = match config.terminated_pods {
        Some(policy) => {
            terminated_pods::check(&client, &policy, &args.origin).await?;
            tokio::spawn(terminated_pods::run(
                client.clone(),
                policy,
                args.origin.clone(),
                deletions.clone(),
            ))
        }
        None => tokio::spawn(futures::future::pending()),
    };
    let changes = Arc::new(Changes::default());
    let selector = watcher::Config::default()
        .labels(&format!("{ORIGIN_LABEL}={}", args.origin))
        .timeout(jobrelay_process::WATCH_TIMEOUT_SECS);
    let scope = policy.watched();
    let (jobs, job_watch) = Watched::new(
        watch_within::<Job>(&client, scope.as_deref(), &selector)
            .modify(jobrelay_process::cache::trim)
            .modify(report::keep_what_is_reported),
        Arc::clone(&changes),
    );
    let (pods, pod_watch) = Watched::new(
        watch_within::<Pod>(&client, scope.as_deref(), &selector)
            .modify(jobrelay_process::cache::trim)
            .modify(mirrors::keep_pod_metadata),
        Arc::clone(&changes),
    );

    let (connected, link_up) = watch::channel(false);
    let sessions = Arc::clone(&metrics);
    let session_state = link_up.clone();
    tokio::spawn(async move { sessions.follow_session(session_state).await });
    tokio::spawn(report_readiness(client.clone(), link_up, readiness));
    let (deleting, held) = metrics.deletion_gauges();
    let agent = Agent {
        dial,
        connected,
        orphan_sweep_interval: args.orphan_sweep_interval,
        cluster: args.cluster.clone(),
        origin: args.origin.clone(),
        epochs: Default::default(),
        adopted_instance: args.adopt_manager_instance.clone(),
        mirrors: Mirrors::new(
            client,
            args.origin.clone(),
            Pacing {
                orphan_pod_grace: args.orphan_pod_grace,
                deletions,
                apply_retry_max: args.apply_retry_max_delay,
                brake: BrakeSettings {
                    share: args.deletion_brake_share,
                    at_least: args.deletion_brake_minimum,
                    confirm: args.deletion_brake_confirm,
                },
            },
            jobs,
            pods,
            changes,
        )
        .report_deletions_on(deleting, held)
        .within(policy),
    };
    info!(cluster = %args.cluster, manager = %args.manager_url.join(","), origin = %args.origin, "agent starting");
    let metrics_failed =
        jobrelay_process::Error::listen("the metrics endpoint", args.metrics_listen);
    let ended = tokio::select! {
        () = agent.run() => Ok(()),
        () = job_watch => Ok(()),
        () = pod_watch => Ok(()),
        () = shutdown.requested() => {
            info!("stopping");
            Ok(())
        }
        served = &mut metrics_server => match served {
            Ok(Err(error)) => Err(metrics_failed(error).into()),
            _ => Ok(()),
        },
    };
    terminated.abort();
    metrics_server.abort();
    health.abort();
    ended
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
