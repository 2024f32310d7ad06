//! When Kueue is asked to try a Workload again, and why a connected cluster
//! cannot take its Job — in words for the check's message. Pure.

use std::time::Duration;

/// How soon Kueue is asked to try again when no worker can take a Workload.
pub const RETRY_AFTER: Duration = Duration::from_secs(10);
/// The longest Kueue is asked to wait before it tries a Workload again.
pub const RETRY_AFTER_AT_MOST: Duration = Duration::from_secs(5 * 60);

/// How soon Kueue is asked to try again a Workload no worker can take
/// (kind, namespace, a pin, the check's parameters), after `retries`
/// earlier `Retry`s of it: twice as long each time, from [`RETRY_AFTER`] to
/// [`RETRY_AFTER_AT_MOST`] — so a Workload that cannot be placed does not
/// have Kueue preempt others for it every few seconds. One that waits for
/// room is tried again every [`RETRY_AFTER`]: room comes back.
pub fn retry_after(retries: u32) -> Duration {
    RETRY_AFTER
        .saturating_mul(1 << retries.min(16))
        .min(RETRY_AFTER_AT_MOST)
}

/// Why a connected cluster cannot take a Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuledOut {
    /// Its `spec.namespaceSelector` does not admit this namespace.
    Namespace(String),
    /// Its agent does not mirror this kind.
    Kind(&'static str),
}

impl std::fmt::Display for RuledOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuledOut::Namespace(namespace) => write!(
                f,
                "its spec.namespaceSelector does not admit namespace {namespace}"
            ),
            RuledOut::Kind(kind) => write!(f, "its agent does not mirror {kind}"),
        }
    }
}
