//! What the two controllers of manager Jobs share — the Job controller
//! ([`crate::controller::reconcile`]) and the status copy ([`crate::status_copy`]):
//! their context, their error, and how a failure is retried, each
//! controller with its own backoff.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use tracing::warn;

use crate::clusters::registry::Registry;
use crate::config::Config;
use crate::controller::superseded::Superseded;
use crate::deletion_turns::DeletionTurns;
use crate::fleet::Fleet;
use crate::job::record::Sealer;
use crate::kinds::Key;
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
    /// Seals the record of where each Job runs.
    pub sealer: Sealer,
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

// Backoff of failed reconciles, per manager Job: a Job whose writes keep
// failing is looked at less and less often (1 s doubling to 5 min, with
// jitter), while every other Job goes on at once; a success starts it over.
const FIRST: Duration = Duration::from_secs(1);
const LONGEST: Duration = Duration::from_secs(300);

/// The backoff of each controller that works on manager Jobs: a failure or
/// a success of one says nothing about the other's writes.
#[derive(Default)]
pub struct Backoffs {
    /// The Job controller's (placement, mirrors, finalizer).
    pub mirrors: Retries,
    /// The status copy's.
    pub status_copy: Retries,
}

#[derive(Default)]
pub struct Retries {
    failing: Mutex<HashMap<Key, ExponentialBackoff>>,
}

impl Retries {
    /// How long until the next try of a Job whose reconcile just failed.
    pub fn failed(&self, key: &Key) -> Duration {
        let mut failing = self.failing.lock().unwrap_or_else(|p| p.into_inner());
        failing
            .entry(key.clone())
            .or_insert_with(|| {
                ExponentialBuilder::default()
                    .with_min_delay(FIRST)
                    .with_max_delay(LONGEST)
                    .with_jitter()
                    .without_max_times()
                    .build()
            })
            .next()
            .unwrap_or(LONGEST)
    }

    /// A Job reconciled fine: its next failure starts from the first delay.
    pub fn succeeded(&self, key: &Key) {
        let mut failing = self.failing.lock().unwrap_or_else(|p| p.into_inner());
        if !failing.is_empty() {
            failing.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;
    use kube::runtime::reflector::ObjectRef;

    fn key(name: &str) -> Key {
        Key::of(&ObjectRef::<Job>::new(name).within("ns"))
    }

    #[test]
    fn failures_back_off_per_job_and_a_success_starts_over() {
        let retries = Retries::default();
        let (a, b) = (key("a"), key("b"));
        let delays: Vec<Duration> = (0..12).map(|_| retries.failed(&a)).collect();
        assert!(delays[0] >= FIRST && delays[0] < FIRST * 2, "{delays:?}");
        assert!(delays[3] >= FIRST * 8, "doubling: {delays:?}");
        assert!(
            delays.iter().all(|d| *d <= LONGEST * 2),
            "capped (jitter at most doubles): {delays:?}"
        );
        assert!(
            retries.failed(&b) < FIRST * 2,
            "another Job is not held back"
        );
        retries.succeeded(&a);
        assert!(retries.failed(&a) < FIRST * 2);
    }

    #[test]
    fn each_controller_keeps_its_own_backoff() {
        let backoffs = Backoffs::default();
        let job = key("a");
        for _ in 0..4 {
            backoffs.status_copy.failed(&job);
        }
        backoffs.mirrors.succeeded(&job);
        assert!(
            backoffs.status_copy.failed(&job) >= FIRST * 16,
            "the Job controller's success does not reset the status copy's backoff"
        );
        assert!(
            backoffs.mirrors.failed(&job) < FIRST * 2,
            "nor do the status copy's failures add to the Job controller's"
        );
    }
}
