//! jobrelay manager: runs in the manager cluster, watches Jobs managed by
//! `jobrelay.dev/manager`, serves the `Relay` gRPC service that worker agents
//! dial, and writes mirror status back.

pub mod cli;
pub mod config;
pub mod events;
pub mod fleet;
pub mod metrics;
pub mod mirror;
pub mod pace;
pub mod placement;
pub mod reconcile;
pub mod retention;
pub mod session;
pub mod status;

use std::sync::Arc;

use futures::StreamExt;
use jobrelay_proto::v1::relay_server::RelayServer;
use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, WatchStreamExt, controller, reflector, watcher};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tracing::{info, warn};

use crate::cli::Args;
use crate::config::Config;
use crate::events::Events;
use crate::fleet::Fleet;
use crate::metrics::Metrics;
use crate::pace::Pace;
use crate::reconcile::Context;
use crate::session::{RelayService, Sessions};

/// Reconciles running at once.
const CONCURRENCY: u16 = 32;

/// Runs the manager until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.insecure_plaintext,
        "TLS is not configured: this build serves the Relay only with --insecure-plaintext (for loopback development)"
    );
    anyhow::ensure!(!args.origin.is_empty(), "--origin must not be empty");
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    info!(?config, "configuration");
    let client = kube::Client::try_default().await?;
    let jobs: Api<Job> = Api::all(client.clone());

    let (triggers, triggered) = mpsc::unbounded_channel();
    let triggers_for_jobs = triggers.clone();
    let fleet = Arc::new(Fleet::new(triggers));
    let events = Events::new(client.clone(), &args.origin);
    // The Job cache is fed by a task of its own, never held back by busy
    // reconciles. Sessions read it for their DesiredSet once it has listed
    // every Job (`synced`; the store's own readiness future wakes only one of
    // several waiters, and the controller is one already).
    let (store, writer) = reflector::store();
    let (synced_tx, synced) = tokio::sync::watch::channel(false);
    let job_events = watcher(jobs, watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    let job_triggers = triggers_for_jobs.clone();
    let cache = tokio::spawn(job_events.for_each(move |event| {
        match event {
            Ok(watcher::Event::Apply(job) | watcher::Event::InitApply(job)) => {
                let _ = job_triggers.send(ObjectRef::from_obj(&job));
            }
            Ok(watcher::Event::InitDone) => {
                if !*synced_tx.borrow() {
                    info!("Job cache synced");
                }
                let _ = synced_tx.send(true);
            }
            Ok(watcher::Event::Delete(_) | watcher::Event::Init) => {}
            Err(error) => warn!(%error, "Job watch error; retrying"),
        }
        futures::future::ready(())
    }));
    let sessions = Arc::new(Sessions {
        synced,
        fleet: Arc::clone(&fleet),
        jobs: store.clone(),
        events: events.clone(),
        origin: args.origin.clone(),
        heartbeat_interval: args.heartbeat_interval,
        remote_retention: config.retention.remote_after_finished,
    });
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    info!(listen = %listener.local_addr()?, origin = %args.origin, "serving jobrelay.v1.Relay");
    let server = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(args.heartbeat_interval))
        .http2_keepalive_timeout(Some(args.heartbeat_interval * 2))
        .add_service(RelayServer::new(RelayService { sessions }))
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            shutdown_signal(),
        );

    let deletions = Arc::new(Pace::per_second(config.deletions_per_second));
    let metrics = Arc::new(Metrics {
        fleet: Arc::clone(&fleet),
        deletions: Arc::clone(&deletions),
    });
    let ctx = Arc::new(Context {
        client,
        fleet,
        events,
        origin: args.origin.clone(),
        config,
        deletions,
    });
    // Every reconcile is triggered through one channel: by Job changes and by
    // what agents report.
    let no_primary_stream = futures::stream::pending::<Result<Job, watcher::Error>>();
    let controller = Controller::for_stream(no_primary_stream, store)
        .with_config(controller::Config::default().concurrency(CONCURRENCY))
        .reconcile_on(UnboundedReceiverStream::new(triggered))
        .graceful_shutdown_on(shutdown_signal())
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|_| futures::future::ready(()));

    tokio::select! {
        served = server => served?,
        served = metrics::serve(args.metrics_listen, metrics) => served?,
        () = controller => {}
    }
    cache.abort();
    info!("stopped");
    Ok(())
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
