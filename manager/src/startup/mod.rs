//! What `jobrelay-manager` does from start to stop, step by step. Every
//! replica checks its flags, connects, watches Jobs, WorkerClusters and
//! Namespaces, serves health, metrics and the admission webhook, and reports
//! ready once its caches are synced; the one that leads also serves the
//! Relay, writes WorkerCluster status and runs the controllers. On SIGINT or
//! SIGTERM everything drains on one shutdown and the Lease is handed on.

mod connect;
mod controllers;
mod leading;
mod relay;
mod seal_key;
mod watches;

use std::sync::Arc;
use std::time::Duration;

use crate::kinds::Key;
use jobrelay_process::{Shutdown, Tasks};
use tokio::sync::{mpsc, watch};
use tracing::info;

use self::connect::{Checked, Clients};
use self::leading::{Leadership, Waited};
use self::watches::Watches;
use crate::cli::Args;
use crate::clusters::agent_certificates::AgentCertificates;
use crate::clusters::status_writer::StatusWriter;
use crate::controller::context::Context;
use crate::deletion_turns::DeletionTurns;
use crate::fleet::Fleet;
use crate::job::record::Sealer;
use crate::session::Sessions;
use crate::telemetry::events::Events;
use crate::telemetry::metrics;
use crate::telemetry::metrics::Metrics;
use crate::{Error, instance, kueue, visibility, webhook};

/// How long the tasks get to finish once the shutdown was requested (within
/// the Pod's termination grace period).
const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// Runs the manager until SIGINT or SIGTERM.
pub async fn run(args: Args) -> Result<(), Error> {
    let checked = Checked::read(&args)?;
    let tasks = Tasks::new(&Shutdown::on_signals());
    let shutdown = tasks.shutdown();
    let (readiness, health) =
        jobrelay_process::health::serve(args.process.health_listen, shutdown.clone()).await?;
    tasks.spawn_to_end(health);
    let clients = Clients::new(&args, &checked.identity);
    let client = clients.behind(checked.fence.clone()).await?;
    let pod_label = clients.pod_label().await?;
    let worker_clusters = connect::worker_clusters(&client).await?;
    let instance = instance::discover(&client).await?;
    webhook::start(&args, client.clone(), shutdown.clone(), &tasks).await?;
    let (triggers, triggered) = mpsc::unbounded_channel();
    let core = Core::new(&client, &args, &checked, triggers.clone());
    let served = connect::served_kinds(&client).await?;
    let sealer = seal_key::load(
        &client,
        &args.election.lease_namespace,
        &args.placement_key_secret,
    )
    .await?;
    let watches = Watches::start(
        &client,
        worker_clusters.clone(),
        &served,
        &core.events,
        &core.fleet.demands(),
        &sealer,
        &tasks,
    );
    let mut metrics_server = core.serve_metrics(&args, &watches, &shutdown, &tasks);
    ready_once_synced(watches.synced.clone(), readiness.clone());
    let mut leadership = Leadership::start(&args, &clients, &checked, &core).await?;
    tokio::select! {
        waited = leadership.wait(&shutdown) => if let Waited::Stopped = waited? {
            tasks.drain(DRAIN_GRACE).await;
            info!("stopped before leading");
            return Ok(());
        },
        served = &mut metrics_server => return metrics_ended(served?, args.metrics_listen),
    }
    let (namespace, key) = (&args.election.lease_namespace, &args.placement_key_secret);
    seal_key::lead(&client, namespace, key, &sealer).await?;
    let sessions = core.sessions(&args, &checked, &watches, &instance, &leadership, &shutdown);
    let logs = (client.clone(), Arc::clone(&sessions));
    visibility::start(&args, logs.0, logs.1, shutdown.clone(), &tasks).await?;
    let server = relay::serve(
        &args,
        checked.tls.clone(),
        sessions,
        &core.metrics,
        &shutdown,
        &tasks,
    );
    let server = server.await?;
    info!(origin = %checked.origin, %instance, "leading");
    if let Some(label) = pod_label.clone() {
        tasks.spawn(label.follow(leadership.leading.clone()));
    }
    tasks.spawn_to_end(
        core.status_writer(&args, worker_clusters, &watches)
            .run(shutdown.clone()),
    );
    let ctx = core.context(&args, client, checked, &watches, sealer);
    let inputs = watches.for_controllers(triggered, triggers);
    let controllers = controllers::start(ctx, inputs, &shutdown, &tasks);
    tokio::select! {
        served = server => served??,
        served = &mut metrics_server => metrics_ended(served?, args.metrics_listen)?,
        lost = leadership.lost() => return Err(lost),
        () = controllers => {}
    }
    leadership.step_down().await;
    if let Some(label) = &pod_label {
        let _ = label.mark(false).await;
    }
    readiness.set(false).await;
    tasks.drain(DRAIN_GRACE).await;
    info!("stopped");
    Ok(())
}

/// What the leader's parts share: the fleet of connected agents, Events,
/// metrics, the pace of retention deletions, what agents' certificates were
/// judged, and the triggers that wake the Job controllers.
struct Core {
    fleet: Arc<Fleet>,
    events: Events,
    metrics: Arc<Metrics>,
    deletions: Arc<DeletionTurns>,
    certificates: Arc<AgentCertificates>,
    triggers: Triggers,
}

/// Wakes the Job controllers for a Job.
type Triggers = mpsc::UnboundedSender<Key>;

impl Core {
    fn new(client: &kube::Client, args: &Args, checked: &Checked, triggers: Triggers) -> Core {
        let fleet = Arc::new(Fleet::new(triggers.clone()));
        let deletions = Arc::new(DeletionTurns::per_second(
            checked.config.deletions_per_second,
        ));
        let metrics = Arc::new(Metrics::new(
            Arc::clone(&fleet),
            Arc::clone(&deletions),
            args.metrics_per_cluster_latencies,
        ));
        let certificates = Arc::new(AgentCertificates::new(metrics.agent_certificate_expiry()));
        let events = Events::new(client.clone(), &checked.origin, args.job_events);
        metrics.count_events_dropped(events.dropped());
        Core {
            events,
            fleet,
            metrics,
            deletions,
            certificates,
            triggers,
        }
    }

    /// Serves `/metrics` until shutdown, with the caches' figures.
    fn serve_metrics(
        &self,
        args: &Args,
        watches: &Watches,
        shutdown: &Shutdown,
        tasks: &Tasks,
    ) -> tokio::task::JoinHandle<std::io::Result<()>> {
        self.metrics
            .read_caches(watches.jobs.objects.clone(), watches.clusters.clone());
        let metrics = Arc::clone(&self.metrics);
        tasks.spawn_to_end(metrics::serve(
            args.metrics_listen,
            metrics,
            shutdown.clone(),
        ))
    }

    fn sessions(
        &self,
        args: &Args,
        checked: &Checked,
        watches: &Watches,
        instance: &str,
        leadership: &Leadership,
        shutdown: &Shutdown,
    ) -> Arc<Sessions> {
        Arc::new(Sessions {
            registry: watches.registry.clone(),
            tls: checked.tls.is_some(),
            metrics: Arc::clone(&self.metrics),
            synced: watches.synced.clone(),
            fleet: Arc::clone(&self.fleet),
            stores: watches.stores(),
            events: self.events.clone(),
            origin: checked.origin.clone(),
            instance: instance.to_string(),
            heartbeat_interval: args.heartbeat_interval,
            remote_retention: checked.config.retention.remote_after_finished,
            limits: args.relay.session_limits(),
            shutdown: shutdown.clone(),
            fence: checked.fence.clone(),
            epoch: leadership.epoch.clone(),
            certificates: Arc::clone(&self.certificates),
            clusters_changed: watches.clusters_changed.clone(),
            wanted: Default::default(),
            hello_reads: tokio::sync::Semaphore::new(crate::session::limits::HELLO_READS_AT_ONCE),
            logs: Arc::default(),
        })
    }

    fn status_writer(
        &self,
        args: &Args,
        api: kube::Api<crate::clusters::worker_cluster::WorkerCluster>,
        watches: &Watches,
    ) -> StatusWriter {
        StatusWriter {
            api,
            clusters: watches.clusters.clone(),
            fleet: Arc::clone(&self.fleet),
            stores: watches.stores(),
            triggers: self.triggers.clone(),
            interval: args.cluster_status_interval,
            refreshes_per_second: args.cluster_status_writes_per_second,
            certificates: Arc::clone(&self.certificates),
        }
    }

    /// The Job controllers' context.
    fn context(
        self,
        args: &Args,
        client: kube::Client,
        checked: Checked,
        watches: &Watches,
        sealer: Sealer,
    ) -> Arc<Context> {
        Arc::new(Context {
            client,
            sealer,
            fleet: self.fleet,
            registry: watches.registry.clone(),
            events: self.events,
            origin: checked.origin,
            config: checked.config,
            deletions: self.deletions,
            retries: Default::default(),
            metrics: self.metrics,
            reservations: Arc::new(kueue::Reservations::default()),
            superseded: Default::default(),
            flavors: kueue::mirror_scheduling::Flavors::on_mirrors(args.kueue_flavors_on_mirrors),
        })
    }
}

/// Reports ready once the caches are synced, leading or not: the Service
/// agents dial follows the leader's label instead.
fn ready_once_synced(
    mut synced: watch::Receiver<bool>,
    readiness: jobrelay_process::health::Readiness,
) {
    tokio::spawn(async move {
        if synced.wait_for(|synced| *synced).await.is_ok() {
            info!("caches synced; ready");
            readiness.set(true).await;
        }
    });
}

/// What the end of the metrics endpoint means: an error if it could not
/// listen, else the shutdown.
fn metrics_ended(served: std::io::Result<()>, addr: std::net::SocketAddr) -> Result<(), Error> {
    served.map_err(|e| jobrelay_process::Error::listen("the metrics endpoint", addr)(e).into())
}
