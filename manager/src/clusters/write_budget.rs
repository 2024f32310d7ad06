//! When a WorkerCluster's status is written: a change of condition at once,
//! whatever the fleet's size; a refresh of heartbeat, counts and version
//! within a fleet-wide budget of writes per second, so the API server's
//! load from status stays the same at ten clusters or ten thousand.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::clusters::worker_cluster::WorkerClusterStatus;

/// Whether a cluster's status needs writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// A condition changed, or nothing was written yet: at once.
    Now,
    /// Only heartbeat, counts or version changed, and the last write is old
    /// enough: when the budget has room.
    Refresh,
    /// Nothing to write.
    No,
}

/// Is a write due? At once when a condition changed; otherwise only when
/// something else changed and the last write is `interval` old.
pub fn due(
    current: Option<&WorkerClusterStatus>,
    desired: &WorkerClusterStatus,
    since_last_write: Option<Duration>,
    interval: Duration,
) -> Due {
    let Some(current) = current else {
        return Due::Now;
    };
    let key = |c: &Condition| (c.type_.clone(), c.status.clone(), c.reason.clone());
    let conditions_changed = current
        .conditions
        .iter()
        .map(key)
        .ne(desired.conditions.iter().map(key));
    if conditions_changed {
        return Due::Now;
    }
    match current != desired && since_last_write.is_none_or(|elapsed| elapsed >= interval) {
        true => Due::Refresh,
        false => Due::No,
    }
}

/// The least time between two refreshes of one cluster: the configured
/// interval, or longer where `clusters` refreshed that often would exceed
/// `per_second` writes across the fleet.
pub fn refresh_interval(configured: Duration, clusters: usize, per_second: f64) -> Duration {
    if per_second <= 0.0 {
        return configured;
    }
    let spread = Duration::from_secs_f64(clusters as f64 / per_second);
    configured.max(spread)
}

/// Refreshes allowed in one pass over the clusters, `tick` apart: the
/// budget's share of the pass, at least one so no refresh waits forever.
pub fn refreshes_per_tick(per_second: f64, tick: Duration) -> usize {
    if per_second <= 0.0 {
        return usize::MAX;
    }
    ((per_second * tick.as_secs_f64()).floor() as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn status(connected: &str, heard: i64) -> WorkerClusterStatus {
        let at = |s| Time(Timestamp::from_second(1_800_000_000 + s).unwrap());
        WorkerClusterStatus {
            conditions: vec![Condition {
                type_: "Connected".into(),
                status: connected.into(),
                reason: "SessionOpen".into(),
                message: String::new(),
                last_transition_time: at(0),
                observed_generation: None,
            }],
            last_heartbeat_time: Some(at(heard)),
            ..Default::default()
        }
    }

    const INTERVAL: Duration = Duration::from_secs(30);

    #[test]
    fn a_status_never_written_is_written_at_once() {
        assert_eq!(due(None, &status("True", 1), None, INTERVAL), Due::Now);
    }

    #[test]
    fn a_change_of_condition_is_written_at_once() {
        let written = status("True", 1);
        let since = Some(Duration::from_secs(1));
        assert_eq!(
            due(Some(&written), &status("False", 1), since, INTERVAL),
            Due::Now
        );
    }

    #[test]
    fn a_heartbeat_is_refreshed_once_the_interval_passed() {
        let written = status("True", 1);
        let later = status("True", 6);
        let early = Some(Duration::from_secs(5));
        assert_eq!(due(Some(&written), &later, early, INTERVAL), Due::No);
        assert_eq!(
            due(Some(&written), &later, Some(INTERVAL), INTERVAL),
            Due::Refresh
        );
    }

    #[test]
    fn nothing_changed_is_never_written() {
        let written = status("True", 1);
        let long = Some(Duration::from_secs(99));
        assert_eq!(due(Some(&written), &written, long, INTERVAL), Due::No);
    }

    #[test]
    fn a_small_fleet_refreshes_at_the_configured_interval() {
        assert_eq!(refresh_interval(INTERVAL, 10, 10.0), INTERVAL);
    }

    #[test]
    fn a_large_fleet_refreshes_each_cluster_less_often_to_stay_in_budget() {
        assert_eq!(
            refresh_interval(INTERVAL, 1000, 10.0),
            Duration::from_secs(100)
        );
    }

    #[test]
    fn no_budget_leaves_the_interval_alone() {
        assert_eq!(refresh_interval(INTERVAL, 1000, 0.0), INTERVAL);
        assert_eq!(refreshes_per_tick(0.0, Duration::from_secs(1)), usize::MAX);
    }

    #[test]
    fn a_pass_refreshes_its_share_of_the_budget_and_at_least_one() {
        assert_eq!(refreshes_per_tick(10.0, Duration::from_secs(1)), 10);
        assert_eq!(refreshes_per_tick(0.2, Duration::from_secs(1)), 1);
    }
}
