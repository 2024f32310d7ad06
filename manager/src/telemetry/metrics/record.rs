//! What the manager records as it works: leadership, refusals, losses, and
//! how long dispatch, status and cleanup take (by cluster, if asked).

use std::sync::PoisonError;
use std::time::Duration;

use super::{ByReason, ByRefusal, Metrics, by};

impl Metrics {
    /// Whether this replica leads, and the Lease's transitions as read.
    pub fn leadership(&self, leading: bool, transitions: i32) {
        self.leader.set(i64::from(leading));
        self.leader_transitions.set(i64::from(transitions));
    }

    /// This replica renewed the Lease at `at`.
    pub fn lease_renewed(&self, at: tokio::time::Instant) {
        *self
            .lease_renewed
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(at);
    }

    /// Counts a refused session or connection.
    pub fn refused(&self, reason: &str) {
        self.sessions_refused
            .get_or_create(&ByReason {
                reason: reason.into(),
            })
            .inc();
    }

    /// Counts a session ended by one of the Relay's limits.
    pub fn session_cut(&self, reason: &str) {
        self.sessions_cut
            .get_or_create(&ByReason {
                reason: reason.into(),
            })
            .inc();
    }

    /// Counts a refusal of a worker.
    pub fn apply_refused(&self, cluster: &str, reason: &str, permanent: bool) {
        let labels = ByRefusal {
            cluster: cluster.into(),
            reason: reason.into(),
            permanent: permanent.to_string(),
        };
        self.apply_refusals.get_or_create(&labels).inc();
    }

    pub fn mirror_lost(&self, cluster: &str) {
        self.mirrors_lost.get_or_create(&by(cluster)).inc();
    }

    /// Counts a DesiredSet sent again because the agent's and the
    /// manager's desired sets drifted apart.
    pub fn desired_set_resent(&self, cluster: &str) {
        self.desired_set_resyncs.get_or_create(&by(cluster)).inc();
    }

    pub fn report_dropped(&self, cluster: &str) {
        self.reports_dropped.get_or_create(&by(cluster)).inc();
    }

    pub fn dispatched(&self, cluster: &str, took: Duration) {
        self.dispatch_seconds
            .get_or_create(&self.latency(cluster))
            .observe(took.as_secs_f64());
    }

    pub fn status_shown(&self, cluster: &str, took: Duration) {
        self.status_seconds
            .get_or_create(&self.latency(cluster))
            .observe(took.as_secs_f64());
    }

    pub fn status_heard(&self, cluster: &str, took: Duration) {
        self.status_heard_seconds
            .get_or_create(&self.latency(cluster))
            .observe(took.as_secs_f64());
    }

    pub fn status_write(&self, cluster: &str, took: Duration) {
        self.status_write_seconds
            .get_or_create(&self.latency(cluster))
            .observe(took.as_secs_f64());
    }

    pub fn status_written(&self) {
        self.status_writes.inc();
    }

    pub fn cleaned_up(&self, cluster: &str, took: Duration) {
        self.cleanup_seconds
            .get_or_create(&self.latency(cluster))
            .observe(took.as_secs_f64());
    }
}
