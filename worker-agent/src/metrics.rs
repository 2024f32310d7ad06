//! Prometheus metrics of the agent (the `prometheus-client` crate, the same
//! conventions as the manager's), served as text on `/metrics` by the
//! process's metrics endpoint: whether it holds a session with the manager
//! and how many it opened, how many DesiredSets it received and when the
//! last came, how many mirrors it is deleting and how many the
//! brake on mass deletion holds, the room reports and what their watches
//! cost, the log streams it serves, and the metrics every jobrelay process
//! has (build, certificate expiry, Kubernetes API latencies).

use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

/// The fence's metrics: whether it is up, how often it went up, how many
/// mirrors it stopped and how many of their Pods the worker still shows.
#[derive(Clone, Default)]
pub struct FenceMetrics {
    pub up: Gauge,
    pub fences: Counter,
    pub mirrors: Gauge,
    pub pods: Gauge,
}

/// The room's metrics: the Room messages sent, the pools in the room last
/// summed, and the events the room's watches took (their cost).
#[derive(Clone, Default)]
pub struct RoomMetrics {
    pub reports: Counter,
    pub pools: Gauge,
    watch_events: Family<ByKind, Counter>,
}

/// The kind a room watch reads: `Node`, `Pod`, `ClusterQueue` or `LocalQueue`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ByKind {
    pub kind: String,
}

impl RoomMetrics {
    /// The counter of the events the room's watch of `kind` took.
    pub fn watch_events(&self, kind: &str) -> Counter {
        self.watch_events
            .get_or_create(&ByKind { kind: kind.into() })
            .clone()
    }
}

/// The log streams' metrics: how many are open, and the log bytes sent.
#[derive(Clone, Default)]
pub struct LogMetrics {
    pub streams: Gauge,
    pub bytes_sent: Counter,
}

/// Every metric of the agent.
pub struct Metrics {
    registry: Mutex<Registry>,
    session_connected: Gauge,
    session_connects: Counter,
    desired_sets: DesiredSets,
    mirrors_deleting: Gauge,
    deletions_held: Gauge,
    foreign_objects: Gauge,
    fence: FenceMetrics,
    room: RoomMetrics,
    logs: LogMetrics,
}

/// The DesiredSets the manager sent: how many came, and when the last did.
#[derive(Clone, Default)]
pub struct DesiredSets {
    received: Counter,
    last_received: Gauge<f64, AtomicU64>,
}

impl DesiredSets {
    /// Notes a DesiredSet received now.
    pub fn received(&self) {
        self.received.inc();
        // A clock before 1970 leaves the last time as it was.
        if let Ok(since_epoch) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
            self.last_received.set(since_epoch.as_secs_f64());
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let metrics = Metrics {
            registry: Mutex::new(Registry::with_prefix("jobrelay")),
            session_connected: Gauge::default(),
            session_connects: Counter::default(),
            desired_sets: DesiredSets::default(),
            mirrors_deleting: Gauge::default(),
            deletions_held: Gauge::default(),
            foreign_objects: Gauge::default(),
            fence: FenceMetrics::default(),
            room: RoomMetrics::default(),
            logs: LogMetrics::default(),
        };
        let mut registry = metrics
            .registry
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        registry.register(
            "agent_session_connected",
            "1 while the agent holds a session the manager welcomed, else 0",
            metrics.session_connected.clone(),
        );
        registry.register(
            "agent_session_connects",
            "Sessions the manager welcomed: the first and every reconnect",
            metrics.session_connects.clone(),
        );
        registry.register(
            "agent_desired_sets_received",
            "DesiredSets the manager sent: one as each session opens",
            metrics.desired_sets.received.clone(),
        );
        registry.register(
            "agent_desired_set_received_timestamp_seconds",
            "When the last DesiredSet was received, in seconds since the epoch (0 until one is)",
            metrics.desired_sets.last_received.clone(),
        );
        registry.register(
            "agent_mirrors_deleting",
            "Mirrors being deleted: waiting for their turn, for their Job, or for their Pods to go (the deletion backlog)",
            metrics.mirrors_deleting.clone(),
        );
        registry.register(
            "agent_deletions_held",
            "Mirrors the brake on mass deletion holds back: a DesiredSet would delete them, the manager does not know them, and they are more than the limits allow at once",
            metrics.deletions_held.clone(),
        );
        registry.register(
            "agent_foreign_objects",
            "Objects carrying the origin UID of a mirror the manager wants, outside that mirror's namespace: not the mirror's (a copy of jobrelay's labels), left alone; each is logged once",
            metrics.foreign_objects.clone(),
        );
        registry.register(
            "agent_fenced",
            "1 while the agent's mirrors are fenced: no manager was heard for the WorkerCluster's fenceAfter, so every mirror that may run Pods was stopped; else 0",
            metrics.fence.up.clone(),
        );
        registry.register(
            "agent_fences",
            "Times the agent fenced its mirrors after hearing no manager for fenceAfter",
            metrics.fence.fences.clone(),
        );
        registry.register(
            "agent_fenced_mirrors",
            "Mirrors the fence in place stopped (suspended, or deleted where the worker's Kueue owns their suspension)",
            metrics.fence.mirrors.clone(),
        );
        registry.register(
            "agent_fenced_pods",
            "Pods of the fenced mirrors the worker still shows, Terminating ones included: 0 once the fence holds",
            metrics.fence.pods.clone(),
        );
        registry.register(
            "agent_room_reports",
            "Room messages sent to the manager: the worker's room by node pool, once per session after its DesiredSet, then on each change at most once per --room-interval",
            metrics.room.reports.clone(),
        );
        registry.register(
            "agent_room_pools",
            "Node pools in the room last summed (0 while the room is not known: not listed yet, not readable, or --room=false)",
            metrics.room.pools.clone(),
        );
        registry.register(
            "agent_room_watch_events",
            "Watch events the room's watches took, by kind (Node, Pod, ClusterQueue, LocalQueue): what reporting the room costs",
            metrics.room.watch_events.clone(),
        );
        registry.register(
            "agent_log_streams",
            "Log streams of mirrors' Pods the agent serves to the manager now (at most 8 at once)",
            metrics.logs.streams.clone(),
        );
        registry.register(
            "agent_log_bytes_sent",
            "Bytes of mirrors' Pod logs sent to the manager, line prefixes included",
            metrics.logs.bytes_sent.clone(),
        );
        jobrelay_process::metrics::register(&mut registry);
        drop(registry);
        metrics
    }

    /// The gauges the mirrors show their deletions in progress, those the
    /// brake holds, and the objects outside their mirror's namespace, on.
    pub fn mirror_gauges(&self) -> (Gauge, Gauge, Gauge) {
        (
            self.mirrors_deleting.clone(),
            self.deletions_held.clone(),
            self.foreign_objects.clone(),
        )
    }

    /// The fence's metrics, for the agent to show its fence on.
    pub fn fence(&self) -> FenceMetrics {
        self.fence.clone()
    }

    /// The room's metrics, for its watches and reports to count on.
    pub fn room(&self) -> RoomMetrics {
        self.room.clone()
    }

    /// The log streams' metrics, for the streams to count on.
    pub fn logs(&self) -> LogMetrics {
        self.logs.clone()
    }

    /// The DesiredSets' counter and time of the last, for the session to
    /// note each on.
    pub fn desired_sets(&self) -> DesiredSets {
        self.desired_sets.clone()
    }

    /// Notes the session going from `was` to `is` (open or not).
    fn session(&self, was: bool, is: bool) {
        self.session_connected.set(i64::from(is));
        if is && !was {
            self.session_connects.inc();
        }
    }

    /// Follows the session's state (true while one is open) until its
    /// sender goes.
    pub async fn follow_session(&self, mut connected: watch::Receiver<bool>) {
        let mut was = false;
        loop {
            let is = *connected.borrow_and_update();
            self.session(was, is);
            was = is;
            if connected.changed().await.is_err() {
                return;
            }
        }
    }

    /// The OpenMetrics text of every metric.
    pub fn render(&self) -> String {
        let registry = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        jobrelay_process::metrics::render(&registry)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Waits until the rendered metrics contain `line`.
    async fn shown(metrics: &Metrics, line: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let text = metrics.render();
            if text.contains(line) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "waited 10s for {line:?}; the metrics are:\n{text}"
            );
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn sessions_are_counted_as_they_open_and_shown_while_open() {
        let metrics = std::sync::Arc::new(Metrics::new());
        let (connected, session) = watch::channel(false);
        let following = tokio::spawn({
            let metrics = std::sync::Arc::clone(&metrics);
            async move { metrics.follow_session(session).await }
        });
        shown(&metrics, "jobrelay_agent_session_connected 0\n").await;
        for _ in 0..2 {
            connected.send_replace(true);
            shown(&metrics, "jobrelay_agent_session_connected 1\n").await;
            connected.send_replace(false);
            shown(&metrics, "jobrelay_agent_session_connected 0\n").await;
        }
        shown(&metrics, "jobrelay_agent_session_connects_total 2\n").await;
        drop(connected);
        tokio::time::timeout(Duration::from_secs(10), following)
            .await
            .expect("following ends with the sender")
            .expect("no panic");
    }

    #[test]
    fn the_deletion_backlog_and_the_process_metrics_are_rendered() {
        let metrics = Metrics::new();
        metrics.mirror_gauges().0.set(250);
        let text = metrics.render();
        // The API latencies and certificate expiries show up once there is
        // a request or a certificate file to tell of.
        for line in [
            "jobrelay_agent_mirrors_deleting 250\n",
            "jobrelay_build_info{version=\"",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
    }

    #[test]
    fn each_desired_set_is_counted_and_the_last_one_timed() {
        let metrics = Metrics::new();
        let before = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .expect("the clock is past 1970")
            .as_secs_f64();
        let desired_sets = metrics.desired_sets();
        desired_sets.received();
        desired_sets.received();
        let text = metrics.render();
        assert!(
            text.contains("jobrelay_agent_desired_sets_received_total 2\n"),
            "{text}"
        );
        let last: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("jobrelay_agent_desired_set_received_timestamp_seconds "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no time of the last DesiredSet in:\n{text}"));
        assert!(last >= before.floor(), "{last} is before {before}");
    }

    #[test]
    fn room_reports_their_pools_and_their_watch_events_are_rendered() {
        let metrics = Metrics::new();
        let room = metrics.room();
        room.reports.inc();
        room.pools.set(3);
        room.watch_events("Node").inc();
        room.watch_events("Pod").inc();
        room.watch_events("Pod").inc();
        let text = metrics.render();
        for line in [
            "jobrelay_agent_room_reports_total 1\n",
            "jobrelay_agent_room_pools 3\n",
            "jobrelay_agent_room_watch_events_total{kind=\"Node\"} 1\n",
            "jobrelay_agent_room_watch_events_total{kind=\"Pod\"} 2\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
    }

    #[test]
    fn open_log_streams_and_log_bytes_sent_are_rendered() {
        let metrics = Metrics::new();
        let logs = metrics.logs();
        logs.streams.inc();
        logs.bytes_sent.inc_by(4096);
        let text = metrics.render();
        for line in [
            "jobrelay_agent_log_streams 1\n",
            "jobrelay_agent_log_bytes_sent_total 4096\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
    }

    #[test]
    fn only_an_opening_counts_as_a_connect() {
        let metrics = Metrics::new();
        for (was, is) in [(false, true), (true, true), (true, false), (false, false)] {
            metrics.session(was, is);
        }
        let text = metrics.render();
        assert!(
            text.contains("jobrelay_agent_session_connects_total 1\n"),
            "{text}"
        );
        assert!(
            text.contains("jobrelay_agent_session_connected 0\n"),
            "{text}"
        );
    }
}
