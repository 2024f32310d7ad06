//! jobrelay worker agent: runs in a worker cluster, dials the manager, applies
//! and deletes mirror Jobs, reports their status, and confirms every Pod gone.

pub mod cli;
pub mod config;
pub mod mirrors;
pub mod report;
pub mod session;
pub mod terminated_pods;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jobrelay_proto::wire::ORIGIN_LABEL;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use tokio::sync::Notify;
use tonic::transport::Endpoint;
use tracing::info;

use crate::cli::Args;
use crate::config::Config;
use crate::mirrors::Mirrors;
use crate::session::Agent;

/// Runs the agent until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.insecure_plaintext,
        "TLS is not configured: this build dials the manager only with --insecure-plaintext (for loopback development)"
    );
    anyhow::ensure!(!args.origin.is_empty(), "--origin must not be empty");
    anyhow::ensure!(!args.cluster.is_empty(), "--cluster must not be empty");
    let endpoint = Endpoint::from_shared(args.manager_url.clone())
        .map_err(|e| anyhow::anyhow!("--manager-url {:?} is not a URL: {e}", args.manager_url))?
        .connect_timeout(Duration::from_secs(5))
        .http2_keep_alive_interval(Duration::from_secs(5))
        .keep_alive_timeout(Duration::from_secs(10))
        .keep_alive_while_idle(true);

    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    info!(?config, "configuration");
    let client = kube::Client::try_default().await?;
    let terminated = match config.terminated_pods {
        Some(policy) => {
            terminated_pods::check(&client, &policy, &args.origin).await?;
            tokio::spawn(terminated_pods::run(
                client.clone(),
                policy,
                args.origin.clone(),
            ))
        }
        None => tokio::spawn(futures::future::pending()),
    };
    let changed = Arc::new(Notify::new());
    let selector = watcher::Config::default().labels(&format!("{ORIGIN_LABEL}={}", args.origin));
    let (jobs, job_writer) = reflector::store::<Job>();
    let (pods, pod_writer) = reflector::store::<Pod>();
    let job_watch = watch(
        reflector::reflector(
            job_writer,
            watcher(Api::<Job>::all(client.clone()), selector.clone()),
        ),
        Arc::clone(&changed),
    );
    let pod_watch = watch(
        reflector::reflector(
            pod_writer,
            watcher(Api::<Pod>::all(client.clone()), selector),
        ),
        Arc::clone(&changed),
    );

    let agent = Agent {
        endpoint,
        cluster: args.cluster.clone(),
        origin: args.origin.clone(),
        mirrors: Mirrors::new(
            client,
            args.origin.clone(),
            args.orphan_pod_grace,
            jobs,
            pods,
        ),
        changed,
    };
    info!(cluster = %args.cluster, manager = %args.manager_url, origin = %args.origin, "agent starting");
    tokio::select! {
        () = agent.run() => {}
        () = job_watch => {}
        () = pod_watch => {}
        () = shutdown_signal() => info!("stopping"),
    }
    terminated.abort();
    Ok(())
}

/// Drives a reflector, signalling `changed` on every event.
async fn watch<K, S>(events: S, changed: Arc<Notify>)
where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    events
        .default_backoff()
        .for_each(|event| {
            if let Err(error) = event {
                tracing::warn!(%error, "watch error; retrying");
            }
            changed.notify_one();
            futures::future::ready(())
        })
        .await;
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => return futures::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
