//! jobrelay manager: runs in the manager cluster, watches Jobs managed by
//! `jobrelay.dev/manager`, serves the `Relay` gRPC service that worker agents
//! dial, and writes mirror status back.

pub mod agent_certificates;
pub mod caches;
pub mod certificate_pin;
pub mod cli;
pub mod cluster_status;
pub mod config;
pub mod crds;
pub mod error;
pub mod events;
pub mod field_manager;
pub mod fleet;
pub mod fleet_views;
pub mod instance;
pub mod job_changes;
pub mod job_life;
pub mod job_writes;
pub mod kueue;
pub mod leader;
pub mod lost;
pub mod metrics;
pub mod mirror;
pub mod outbox;
pub mod pace;
pub mod placement;
pub mod reconcile;
pub mod registry;
pub mod retention;
pub mod retries;
pub mod session;
pub mod status;
pub mod status_queue;
pub mod status_sync;
pub mod superseded;
pub mod webhook;
pub mod worker_cluster;
pub mod worker_cluster_set;

use std::sync::Arc;

use futures::StreamExt;
use jobrelay_process::cache::trim;
use jobrelay_process::{Fence, RefusedConnection, ServerTls, Shutdown};
use jobrelay_proto::v1::relay_server::RelayServer;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, controller, reflector, watcher};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tracing::{info, warn};

use crate::agent_certificates::AgentCertificates;
use crate::caches::{all_synced, cache};
use crate::cli::{Args, Cli, Command};
use crate::cluster_status::StatusWriter;
use crate::config::Config;
pub use crate::error::Error;
use crate::events::Events;
use crate::fleet::Fleet;
use crate::job_changes::JobChanges;
use crate::leader::pod_label::PodLabel;
use crate::metrics::Metrics;
use crate::pace::Pace;
use crate::reconcile::Context;
use crate::registry::Registry;
use crate::session::{RelayService, Sessions};
use crate::worker_cluster::WorkerCluster;

/// Reconciles running at once.
const CONCURRENCY: u16 = 32;
/// Status copies running at once (half of them at most for Jobs that have
/// not finished).
const STATUS_CONCURRENCY: usize = 16;

/// Runs what the command line asks for.
pub async fn main(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Some(Command::Crd) => {
            print!("{}", crds::all());
            Ok(())
        }
        None => run(cli.run).await,
    }
}

/// Runs the manager until SIGINT or SIGTERM.
pub async fn run(args: Args) -> Result<(), Error> {
    let origin = args.origin.clone().unwrap_or_default();
    if origin.is_empty() {
        return Err(Error::NoOrigin);
    }
    let kube_api_limit = args.process.kube_api.rate_limit()?;
    let kubeconfig = args.process.kubeconfig.as_deref();
    let tls = args.process.certificates.files(
        args.client_ca.as_ref(),
        "--client-ca",
        args.insecure_plaintext,
    )?;
    let config = match &args.config {
        Some(path) => jobrelay_process::config_file::load(path, Config::parse)?,
        None => Config::default(),
    };
    info!(?config, "configuration");
    let election = &args.election;
    let settings = election.settings()?;
    let identity = election.identity().ok_or(Error::NoIdentity)?;
    // Every write passes the fence; the Lease keeper opens it while this
    // replica leads (without election it is always open).
    let fence = match election.leader_elect {
        true => Fence::default(),
        false => Fence::open(),
    };
    let shutdown = Shutdown::on_signals();
    let (readiness, health) =
        jobrelay_process::health::serve(args.process.health_listen, shutdown.clone()).await?;
    let user_agent = format!(
        "jobrelay-manager/{} ({identity})",
        env!("CARGO_PKG_VERSION")
    );
    let client = jobrelay_process::kube_client::fenced_client(
        kubeconfig,
        kube_api_limit,
        fence.clone(),
        &user_agent,
    )
    .await?;
    // The leader's label on its Pod is written outside the fence; a mark an
    // earlier container of this Pod left is cleared before anything else.
    let pod_label = match election.pod() {
        Some((namespace, name)) => {
            let unfenced = jobrelay_process::kube_client::fenced_client(
                kubeconfig,
                kube_api_limit,
                Fence::open(),
                &user_agent,
            )
            .await?;
            let label = PodLabel::new(unfenced, namespace, name);
            // A later change of leadership writes it again; a failure here
            // leaves at worst a stale mark on a replica not yet listening.
            let _ = label.mark(false).await;
            Some(label)
        }
        None => None,
    };
    let worker_clusters: Api<WorkerCluster> = Api::all(client.clone());
    if let Err(error) = worker_clusters.list(&ListParams::default().limit(1)).await {
        match error {
            kube::Error::Api(status) if status.code == 404 => return Err(Error::NoCrd),
            error => return Err(Error::WorkerClusters(error)),
        }
    }
    let instance = instance::discover(&client).await?;
    webhook::start(&args, client.clone(), shutdown.clone()).await?;

    let (triggers, triggered) = mpsc::unbounded_channel();
    let fleet = Arc::new(Fleet::new(triggers.clone()));
    let events = Events::new(client.clone(), &origin);
    // Each cache is fed by a task of its own. Both controllers read the Jobs
    // that changed from sets the Job watch marks (kept, one key per Job,
    // while this replica follows). Sessions read the caches once every one
    // has listed its objects.
    let (jobs, job_writer) = reflector::store::<Job>();
    let job_changes = JobChanges::default();
    let [mirror_changes, status_changes] = [(); 2].map(|()| job_changes.subscribe(jobs.clone()));
    let marked = jobs.clone();
    let published = events.clone();
    let (jobs_synced, job_cache) = cache(
        Api::<Job>::all(client.clone()),
        mirror::for_cache,
        job_writer,
        move |event| {
            if let watcher::Event::Delete(job) = event
                && let Some(uid) = &job.metadata.uid
            {
                published.forget(uid);
            }
            job_changes.mark(job_changes::touched(event, || {
                marked
                    .state()
                    .iter()
                    .map(|job| ObjectRef::from_obj(&**job))
                    .collect()
            }));
        },
    );
    let (clusters, cluster_writer) = reflector::store();
    let (cluster_changes, clusters_changed) = watch::channel(());
    let (clusters_synced, cluster_cache) =
        cache(worker_clusters.clone(), trim, cluster_writer, move |_| {
            cluster_changes.send_modify(|()| ())
        });
    let (namespaces, namespace_writer) = reflector::store();
    let (namespaces_synced, namespace_cache) = cache(
        Api::<Namespace>::all(client.clone()),
        trim,
        namespace_writer,
        |_| {},
    );
    let synced = all_synced([jobs_synced, clusters_synced, namespaces_synced]);
    let registry = Registry {
        clusters: clusters.clone(),
        namespaces,
    };
    let deletions = Arc::new(Pace::per_second(config.deletions_per_second));
    let metrics = Arc::new(Metrics::new(Arc::clone(&fleet), Arc::clone(&deletions)));
    metrics.read_caches(jobs.clone(), clusters.clone());
    let certificates = Arc::new(AgentCertificates::new(metrics.agent_certificate_expiry()));
    if !election.leader_elect {
        // Working alone is leading, for jobrelay_leader and its alert.
        metrics.leadership(true, 0);
    }
    let mut metrics_server = tokio::spawn(metrics::serve(
        args.metrics_listen,
        Arc::clone(&metrics),
        shutdown.clone(),
    ));
    // Ready once the caches are synced, leading or not: the Service agents
    // dial follows the leader's label instead.
    let mut ready = synced.clone();
    let ready_readiness = readiness.clone();
    tokio::spawn(async move {
        if ready.wait_for(|synced| *synced).await.is_ok() {
            info!("caches synced; ready");
            ready_readiness.set(true).await;
        }
    });
    let (leading_tx, mut leading) = watch::channel(!election.leader_elect);
    let (epoch_tx, epoch) = watch::channel(leader::Epoch::default());
    let (stop_keeping, stop) = watch::channel(false);
    let mut keeper = match election.leader_elect {
        true => {
            // The Lease is written outside the fence (its writes are what
            // opens it), conditional on the version read.
            let leases = jobrelay_process::kube_client::fenced_client(
                kubeconfig,
                kube_api_limit,
                Fence::open(),
                &user_agent,
            )
            .await?;
            info!(%identity, lease = %election.lease_name, namespace = %election.lease_namespace, "waiting to lead");
            tokio::spawn(
                leader::Keeper {
                    leases: Api::namespaced(leases, &election.lease_namespace),
                    name: election.lease_name.clone(),
                    identity: identity.clone(),
                    settings,
                    fence: fence.clone(),
                    leading: leading_tx,
                    epoch: epoch_tx,
                    metrics: Arc::clone(&metrics),
                    events: events.clone(),
                }
                .run(stop),
            )
        }
        false => tokio::spawn(futures::future::pending()),
    };
    // A follower keeps its caches warm and waits; only the leader serves
    // agents and reconciles.
    tokio::select! {
        led = leading.wait_for(|leading| *leading) => { led.map_err(|_| Error::NoLeader)?; }
        () = shutdown.clone().requested() => {
            info!("stopped before leading");
            return Ok(());
        }
        ended = &mut keeper => return Err(ended?.err().map_or(Error::NoLeader, Error::from)),
        served = &mut metrics_server => {
            metrics_ended(served?, args.metrics_listen)?;
            return Ok(());
        }
    }
    let sessions = Arc::new(Sessions {
        registry: registry.clone(),
        tls: tls.is_some(),
        metrics: Arc::clone(&metrics),
        synced: synced.clone(),
        fleet: Arc::clone(&fleet),
        jobs: jobs.clone(),
        events: events.clone(),
        origin: origin.clone(),
        instance: instance.clone(),
        heartbeat_interval: args.heartbeat_interval,
        remote_retention: config.retention.remote_after_finished,
        limits: args.relay.session_limits(),
        shutdown: shutdown.clone(),
        fence: fence.clone(),
        epoch,
        certificates: Arc::clone(&certificates),
        clusters_changed,
    });
    let relay = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(args.heartbeat_interval))
        .http2_keepalive_timeout(Some(args.heartbeat_interval * 2))
        .max_concurrent_streams(Some(session::limits::MAX_CONCURRENT_STREAMS))
        .http2_max_header_list_size(Some(session::limits::MAX_HEADER_LIST_SIZE))
        .add_service(
            RelayServer::new(RelayService { sessions })
                .max_decoding_message_size(session::limits::HELLO_LIMIT),
        );
    let listener = tokio::net::TcpListener::bind(args.listen).await.map_err(
        jobrelay_process::Error::listen("the Relay service", args.listen),
    )?;
    info!(listen = %args.listen, %origin, %instance, tls = tls.is_some(), "serving jobrelay.v1.Relay");
    let server = match tls {
        Some(files) => {
            let pem = files.read()?;
            let server_tls = Arc::new(ServerTls::new(&pem)?);
            tokio::spawn(
                Arc::clone(&server_tls).follow(
                    files.watch(pem, args.process.certificates.certificate_reload_interval),
                ),
            );
            let refused = Arc::clone(&metrics);
            let incoming = server_tls.incoming(
                listener,
                args.relay.connection_limits(),
                Arc::new(move |connection: &RefusedConnection| {
                    session::log_refused_connection(connection);
                    refused.refused(connection.reason);
                }),
            );
            tokio::spawn(relay.serve_with_incoming_shutdown(incoming, shutdown.clone().requested()))
        }
        None => tokio::spawn(relay.serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            shutdown.clone().requested(),
        )),
    };
    if let Some(label) = pod_label.clone() {
        tokio::spawn(label.follow(leading.clone()));
    }
    let status_writer = tokio::spawn(
        StatusWriter {
            api: worker_clusters,
            clusters,
            fleet: Arc::clone(&fleet),
            jobs: jobs.clone(),
            triggers: triggers.clone(),
            interval: args.cluster_status_interval,
            certificates,
        }
        .run(),
    );

    let reservations = Arc::new(kueue::Reservations::default());
    let (to_workloads, for_workloads) = mpsc::unbounded_channel();
    let (stores, writers) = kueue::discovery::stores();
    let admission = tokio::spawn(kueue::discovery::run_when_installed(
        kueue::controller::Context {
            client: client.clone(),
            checks: stores.checks,
            flavors: stores.flavors,
            sets: stores.sets,
            jobs: jobs.clone(),
            registry: registry.clone(),
            fleet: Arc::clone(&fleet),
            reservations: Arc::clone(&reservations),
            triggers: triggers.clone(),
            events: events.clone(),
            avoid_after_pods_not_ready: config.kueue.avoid_after_pods_not_ready,
        },
        writers,
        shutdown.clone(),
        for_workloads,
    ));
    let ctx = Arc::new(Context {
        client,
        fleet,
        registry,
        events,
        origin,
        config,
        deletions,
        retries: Default::default(),
        metrics: Arc::clone(&metrics),
        reservations,
        superseded: Default::default(),
        flavors: kueue::mirror_scheduling::Flavors::on_mirrors(args.kueue_flavors_on_mirrors),
    });
    // Both controllers see every Job change (their shared-store
    // subscriptions) and every trigger of the fleet (what agents report): the
    // one that acts on a Job's mirror, and the one that copies its status (so
    // a status never waits behind a queue of Jobs to dispatch).
    let (to_mirrors, for_mirrors) = mpsc::unbounded_channel();
    let (to_status, for_status) = mpsc::unbounded_channel();
    let waiting = Arc::clone(&ctx.reservations);
    let fan_out = tokio::spawn(async move {
        let mut triggered = triggered;
        while let Some(key) = triggered.recv().await {
            if let Some(workload) = waiting.workload_of(&key) {
                let _ = to_workloads.send(workload);
            }
            let _ = to_status.send(key.clone());
            let _ = to_mirrors.send(key);
        }
    });
    let mirrors = Controller::for_shared_stream(mirror_changes, jobs.clone())
        .with_config(controller::Config::default().concurrency(CONCURRENCY))
        .reconcile_on(UnboundedReceiverStream::new(for_mirrors))
        .graceful_shutdown_on(shutdown.clone().requested())
        .run(
            reconcile::reconcile,
            reconcile::error_policy,
            Arc::clone(&ctx),
        )
        .for_each(|_| futures::future::ready(()));
    let status = status_sync::run(
        ctx,
        jobs,
        status_changes,
        for_status,
        STATUS_CONCURRENCY,
        shutdown.clone(),
    );

    tokio::select! {
        served = server => served??,
        served = &mut metrics_server => metrics_ended(served?, args.metrics_listen)?,
        ended = &mut keeper => return Err(ended?.err().map_or(Error::NoLeader, Error::from)),
        ((), ()) = futures::future::join(mirrors, status) => {}
    }
    // Stopped gracefully: hand the Lease to a follower.
    stop_keeping.send_replace(true);
    if let Ok(Err(stepped_down)) = keeper.await {
        warn!(%stepped_down, "stepped down while stopping");
    }
    fan_out.abort();
    if let Some(label) = &pod_label {
        let _ = label.mark(false).await;
    }
    readiness.set(false).await;
    for task in [job_cache, cluster_cache, namespace_cache, status_writer] {
        task.abort();
    }
    admission.abort();
    health.abort();
    info!("stopped");
    Ok(())
}

/// What the end of the metrics endpoint means: an error if it could not
/// listen, else the shutdown.
fn metrics_ended(served: std::io::Result<()>, addr: std::net::SocketAddr) -> Result<(), Error> {
    served.map_err(|e| jobrelay_process::Error::listen("the metrics endpoint", addr)(e).into())
}
