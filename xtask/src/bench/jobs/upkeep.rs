//! What the API servers spend with no Job moving (watches, leases, node
//! heartbeats), measured over an idle window before the steps, so that a
//! step's API-server CPU per Job can be set beside another's without it: a
//! relayed step keeps two worker API servers up over its span where a
//! direct one keeps one, and for longer.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::bench::shared::figures::ratio;
use crate::bench::shared::machine::Spent;

/// How long the idle API servers are watched.
pub const WINDOW: Duration = Duration::from_secs(10);

const API_SERVER: &str = "kube-apiserver";

/// CPU seconds per second each API server spends with nothing moving.
pub async fn measure(spent: &Spent) -> BTreeMap<String, f64> {
    let before = spent.sample();
    // The measurement window itself: nothing is waited for.
    tokio::time::sleep(WINDOW).await;
    let (used, _) = spent.since(&before);
    used.into_iter()
        .filter(|(program, _)| program.starts_with(API_SERVER))
        .map(|(program, seconds)| (program, seconds / WINDOW.as_secs_f64()))
        .collect()
}

/// The workers' API servers' CPU per Job in a step that spent `used` over
/// `span_seconds`, in ms, less what they spend idle over that span.
pub fn workers_api_ms_per_job(
    used: &BTreeMap<String, f64>,
    upkeep: &BTreeMap<String, f64>,
    span_seconds: f64,
    manager_cluster: &str,
    jobs: usize,
) -> f64 {
    let manager = format!("{API_SERVER} {manager_cluster}");
    let seconds: f64 = used
        .iter()
        .filter(|(program, _)| program.starts_with(API_SERVER) && **program != manager)
        .map(|(program, seconds)| {
            let idle = upkeep.get(program).copied().unwrap_or(0.0) * span_seconds;
            (seconds - idle).max(0.0)
        })
        .sum();
    seconds * 1000.0 / jobs.max(1) as f64
}

/// The workers' API-server CPU per relayed Job beside a direct one, idle
/// upkeep taken out, for dispatch (until the Pods run) and cleanup.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct WorkersApi {
    pub dispatch_ms_per_job: f64,
    pub direct_run_ms_per_job: f64,
    pub dispatch_ratio: f64,
    pub cleanup_ms_per_job: f64,
    pub direct_cleanup_ms_per_job: f64,
    pub cleanup_ratio: f64,
}

impl WorkersApi {
    /// From the steps `spent` recorded: (relayed, direct) step names for
    /// dispatch and for cleanup.
    pub fn of(
        spent: &Spent,
        upkeep: &BTreeMap<String, f64>,
        manager_cluster: &str,
        jobs: usize,
        [dispatch, run, cleanup, direct]: [&str; 4],
    ) -> WorkersApi {
        let per_job = |step: &str| {
            let used = spent.by_step.get(step).cloned().unwrap_or_default();
            let span = spent.spans.get(step).copied().unwrap_or(0.0);
            workers_api_ms_per_job(&used, upkeep, span, manager_cluster, jobs)
        };
        let (d, r, c, x) = (
            per_job(dispatch),
            per_job(run),
            per_job(cleanup),
            per_job(direct),
        );
        WorkersApi {
            dispatch_ms_per_job: d,
            direct_run_ms_per_job: r,
            dispatch_ratio: ratio(d, r),
            cleanup_ms_per_job: c,
            direct_cleanup_ms_per_job: x,
            cleanup_ratio: ratio(c, x),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::jobs::ceiling::tests::used;

    #[test]
    fn each_worker_api_servers_idle_cost_over_the_span_is_taken_out() {
        let spent = used(&[
            ("kube-apiserver worker-1", 3.0),
            ("kube-apiserver worker-2", 2.0),
            ("kube-apiserver manager", 9.0),
            ("kube-controller-manager worker-1", 1.0),
        ]);
        let upkeep = used(&[
            ("kube-apiserver worker-1", 0.1),
            ("kube-apiserver worker-2", 0.1),
        ]);
        // 5 s less 2 × 0.1 × 10 s = 3 s over 100 Jobs.
        let ms = workers_api_ms_per_job(&spent, &upkeep, 10.0, "manager", 100);
        assert!((ms - 30.0).abs() < 1e-9, "{ms}");
    }

    #[test]
    fn a_server_never_counts_below_nothing() {
        let spent = used(&[("kube-apiserver worker-2", 0.1)]);
        let upkeep = used(&[("kube-apiserver worker-2", 0.5)]);
        assert_eq!(
            workers_api_ms_per_job(&spent, &upkeep, 10.0, "manager", 10),
            0.0
        );
    }
}
