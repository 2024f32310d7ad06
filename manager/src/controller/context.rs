//! What the two controllers of manager Jobs share — the Job controller
//! ([`crate::controller::reconcile`]) and the status copy ([`crate::status_copy`]):
//! their context, their error, and how a failure is retried, each
//! controller with its own backoff.

use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use crate::clusters::registry::Registry;
use crate::config::Config;
use crate::controller::retries::{Backoffs, Retries};
use crate::controller::superseded::Superseded;
use crate::deletion_turns::DeletionTurns;
use crate::fleet::Fleet;
use crate::kinds::key::Key;
use crate::kueue::Reservations;
use crate::kueue::mirror_scheduling::Flavors;
use crate::telemetry::events::Events;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Job {0} has no {1}")]
    Incomplete(String, &'static str),
    #[error("Job {job}: {source}")]
    Kube {
        job: String,
        #[source]
        source: kube::Error,
    },
}

pub struct Context {
    pub client: kube::Client,
    pub fleet: Arc<Fleet>,
    pub registry: Registry,
    pub events: Events,
    pub origin: String,
    pub config: Config,
    /// Paces deletions of manager Jobs by retention.
    pub deletions: Arc<DeletionTurns>,
    /// Backoff of each controller's failed reconciles, per Job.
    pub retries: Backoffs,
    pub metrics: Arc<crate::telemetry::metrics::Metrics>,
    /// Jobs Kueue reserved quota for, waiting on jobrelay's admission check.
    pub reservations: Arc<Reservations>,
    /// Copies of Jobs that this replica's writes replaced.
    pub superseded: Superseded,
    /// Whether Kueue's flavors go onto mirrors (`--kueue-flavors-on-mirrors`).
    pub flavors: Flavors,
}

/// When to retry a Job whose reconcile failed: its own backoff in `retries`
/// (each controller keeps its own).
pub fn retry_in(key: &Key, error: &Error, retries: &Retries) -> Duration {
    let retry_in = retries.failed(key);
    warn!(%error, ?retry_in, "reconcile failed; retrying");
    retry_in
}
