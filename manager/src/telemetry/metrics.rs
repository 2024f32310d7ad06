//! Prometheus metrics of the manager (the `prometheus-client` crate), served
//! as text on `/metrics` by the process's metrics endpoint: sessions,
//! refusals and rejections by reason, mirrors by cluster and phase,
//! histograms of how long dispatch, status and cleanup take (fleet-wide, or
//! per cluster where an operator asks),
//! each cluster's link and the Jobs waiting for dispatch (`caches`), and
//! the metrics every jobrelay process has (build, certificate expiry,
//! Kubernetes API latencies).

mod caches;
mod record;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::batch::v1::Job;
use kube::runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::clusters::worker_cluster::WorkerCluster;
use crate::deletion_turns::DeletionTurns;
use crate::fleet::Fleet;

pub use crate::clusters::ByCluster;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ByReason {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ByRefusal {
    pub cluster: String,
    pub reason: String,
    pub permanent: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ByPhase {
    pub cluster: String,
    pub phase: String,
}

/// A latency's labels: `cluster`, where latencies are kept per cluster;
/// none, fleet-wide (the default: 27 series per histogram, whatever the
/// fleet's size).
type LatencyLabels = Vec<(&'static str, String)>;

type Seconds = Family<LatencyLabels, Histogram, fn() -> Histogram>;

/// Upper bounds of the latency buckets, in seconds: 50 ms to 10 minutes,
/// close together around the second or two a status or a dispatch takes.
const BUCKETS: [f64; 24] = [
    0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 20.0,
    30.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0,
];

fn seconds() -> Histogram {
    Histogram::new(BUCKETS)
}

/// Every metric of the manager. Counters and histograms are updated where
/// things happen; gauges are read from the fleet, the retention pace and
/// the caches at each scrape.
pub struct Metrics {
    fleet: Arc<Fleet>,
    deletions: Arc<DeletionTurns>,
    registry: Mutex<Registry>,
    /// Whether latency histograms are kept per cluster.
    per_cluster_latencies: bool,
    sessions_refused: Family<ByReason, Counter>,
    sessions_cut: Family<ByReason, Counter>,
    apply_refusals: Family<ByRefusal, Counter>,
    mirrors_lost: Family<ByCluster, Counter>,
    reports_dropped: Family<ByCluster, Counter>,
    desired_set_resyncs: Family<ByCluster, Counter>,
    dispatch_seconds: Seconds,
    status_seconds: Seconds,
    status_heard_seconds: Seconds,
    status_write_seconds: Seconds,
    status_writes: Counter,
    cleanup_seconds: Seconds,
    connected_clusters: Gauge,
    mirrors: Family<ByPhase, Gauge>,
    retention_waiting: Gauge,
    retention_deleted: Counter,
    leader: Gauge,
    leader_transitions: Gauge,
    lease_renewed_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    lease_renewed: Mutex<Option<tokio::time::Instant>>,
    caches: caches::CacheGauges,
    agent_certificate_expiry: Family<ByCluster, Gauge>,
}

impl Metrics {
    /// The manager's metrics; latency histograms by cluster only when
    /// `per_cluster_latencies` (each costs 27 series per cluster).
    pub fn new(
        fleet: Arc<Fleet>,
        deletions: Arc<DeletionTurns>,
        per_cluster_latencies: bool,
    ) -> Self {
        let metrics = Metrics {
            fleet,
            deletions,
            registry: Mutex::new(Registry::with_prefix("jobrelay")),
            per_cluster_latencies,
            sessions_refused: Family::default(),
            sessions_cut: Family::default(),
            apply_refusals: Family::default(),
            mirrors_lost: Family::default(),
            reports_dropped: Family::default(),
            desired_set_resyncs: Family::default(),
            dispatch_seconds: Family::new_with_constructor(seconds),
            status_seconds: Family::new_with_constructor(seconds),
            status_heard_seconds: Family::new_with_constructor(seconds),
            status_write_seconds: Family::new_with_constructor(seconds),
            status_writes: Counter::default(),
            cleanup_seconds: Family::new_with_constructor(seconds),
            connected_clusters: Gauge::default(),
            mirrors: Family::default(),
            retention_waiting: Gauge::default(),
            retention_deleted: Counter::default(),
            leader: Gauge::default(),
            leader_transitions: Gauge::default(),
            lease_renewed_seconds: Gauge::default(),
            lease_renewed: Mutex::new(None),
            caches: caches::CacheGauges::default(),
            agent_certificate_expiry: Family::default(),
        };
        let mut registry = metrics
            .registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        metrics.register_relay(&mut registry);
        // Shown at 0 from the start, so the first refusal of a skewed agent
        // is an increase the version-skew alert sees.
        drop(metrics.sessions_refused.get_or_create(&ByReason {
            reason: "version_skew".into(),
        }));
        metrics.register_latencies(&mut registry);
        metrics.register_state(&mut registry);
        metrics.caches.register(&mut registry);
        jobrelay_process::metrics::register(&mut registry);
        drop(registry);
        metrics
    }

    /// Counts the Events `events` drops because its queue is full.
    pub fn count_events_dropped(&self, dropped: prometheus_client::metrics::counter::Counter) {
        let mut registry = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        registry.register(
            "events_dropped",
            "Events not recorded because as many as the queue holds were waiting for their write (a flood of reports, or an API server that stopped answering)",
            dropped,
        );
    }

    /// The Relay's and the sessions' counters: refusals, cuts, losses, dropped reports.
    fn register_relay(&self, registry: &mut Registry) {
        registry.register(
            "sessions_refused",
            "Agent connections refused, by reason: at the TLS handshake, a Relay limit, or the Hello",
            self.sessions_refused.clone(),
        );
        registry.register(
            "sessions_cut",
            "Agent sessions ended by a Relay limit (outbox_full, message_too_large); the agent dials again and resyncs",
            self.sessions_cut.clone(),
        );
        registry.register(
            "apply_refusals",
            "Mirrors a worker refused, by cluster, reason and whether the refusal is permanent",
            self.apply_refusals.clone(),
        );
        registry.register(
            "mirrors_lost",
            "Mirrors removed behind jobrelay's back, by cluster",
            self.mirrors_lost.clone(),
        );
        registry.register(
            "reports_dropped",
            "Agent reports about mirrors not placed on their cluster, dropped, by cluster",
            self.reports_dropped.clone(),
        );
        registry.register(
            "desired_set_resyncs",
            "DesiredSets sent again mid-session because the agent held another desired set than the manager wants, by cluster",
            self.desired_set_resyncs.clone(),
        );
    }

    /// How long dispatch, status and cleanup take (by cluster, if asked).
    fn register_latencies(&self, registry: &mut Registry) {
        registry.register(
            "dispatch_seconds",
            "From sending a mirror to the worker reporting it held",
            self.dispatch_seconds.clone(),
        );
        registry.register(
            "status_seconds",
            "From a mirror finishing on its worker (its condition's time) to the manager Job showing it",
            self.status_seconds.clone(),
        );
        registry.register(
            "status_heard_seconds",
            "From a mirror finishing on its worker (its condition's time) to the manager hearing it from the agent; the rest of status_seconds is the manager's write",
            self.status_heard_seconds.clone(),
        );
        registry.register(
            "status_write_seconds",
            "The request that shows a finished Job's status on the manager, alone (the rest of status_seconds after status_heard_seconds is the wait for it)",
            self.status_write_seconds.clone(),
        );
        registry.register(
            "status_writes",
            "Writes of the status copy that changed a manager Job's status",
            self.status_writes.clone(),
        );
        registry.register(
            "cleanup_seconds",
            "From sending a delete to the worker confirming the mirror and every Pod gone",
            self.cleanup_seconds.clone(),
        );
    }

    /// What the fleet, retention, the Lease and the agents' certificates stand at.
    fn register_state(&self, registry: &mut Registry) {
        registry.register(
            "connected_clusters",
            "Worker clusters with an open session",
            self.connected_clusters.clone(),
        );
        registry.register(
            "mirrors",
            "Mirrors the manager wants, by cluster and last reported phase",
            self.mirrors.clone(),
        );
        registry.register(
            "retention_waiting",
            "Manager Jobs due for deletion, waiting for their turn",
            self.retention_waiting.clone(),
        );
        registry.register(
            "retention_deleted",
            "Manager Jobs deleted because their retention ran out",
            self.retention_deleted.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the Lease and does the manager's work, else 0",
            self.leader.clone(),
        );
        registry.register(
            "leader_transitions",
            "Times the Lease changed hands, as last read (its leaseTransitions)",
            self.leader_transitions.clone(),
        );
        registry.register(
            "lease_renewed_seconds",
            "Seconds since this replica last renewed the Lease (absent until it first did)",
            self.lease_renewed_seconds.clone(),
        );
        registry.register(
            "agent_certificate_expiry_timestamp_seconds",
            "When the client certificate of each cluster's latest agent session expires, in seconds since the epoch",
            self.agent_certificate_expiry.clone(),
        );
    }

    /// Reads the WorkerClusters' links and the Jobs waiting for dispatch
    /// from these caches at each scrape (until called, those gauges stay
    /// empty or 0).
    pub fn read_caches(&self, jobs: Store<Job>, clusters: Store<WorkerCluster>) {
        self.caches.read(jobs, clusters);
    }

    /// The per-cluster agent certificate expiry, for
    /// [`crate::clusters::agent_certificates::AgentCertificates`] to set.
    pub fn agent_certificate_expiry(&self) -> Family<ByCluster, Gauge> {
        self.agent_certificate_expiry.clone()
    }

    /// The OpenMetrics text of every metric, gauges read now.
    pub fn render(&self) -> String {
        self.connected_clusters
            .set(self.fleet.candidates().len() as i64);
        self.mirrors.clear();
        for ((cluster, phase), count) in self.fleet.mirrors_by_phase() {
            let labels = ByPhase {
                cluster,
                phase: phase
                    .as_str_name()
                    .trim_start_matches("MIRROR_PHASE_")
                    .to_lowercase(),
            };
            self.mirrors.get_or_create(&labels).set(count as i64);
        }
        self.retention_waiting.set(self.deletions.waiting() as i64);
        self.caches.update(&self.fleet);
        if let Some(renewed) = *self
            .lease_renewed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            self.lease_renewed_seconds
                .set(renewed.elapsed().as_secs_f64());
        }
        let deleted = self.deletions.total();
        let shown = self.retention_deleted.get();
        if deleted > shown {
            self.retention_deleted.inc_by(deleted - shown);
        }
        let registry = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        jobrelay_process::metrics::render(&registry)
    }
}

fn by(cluster: &str) -> ByCluster {
    ByCluster {
        cluster: cluster.into(),
    }
}

impl Metrics {
    /// The labels of a latency observed for `cluster`.
    fn latency(&self, cluster: &str) -> LatencyLabels {
        match self.per_cluster_latencies {
            true => vec![("cluster", cluster.into())],
            false => Vec::new(),
        }
    }
}

/// Serves `/metrics` on `addr` until the shutdown.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    shutdown: jobrelay_process::Shutdown,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let render = Arc::new(move || metrics.render());
    jobrelay_process::metrics_server::serve(listener, render, shutdown).await
}

#[cfg(test)]
mod tests;
