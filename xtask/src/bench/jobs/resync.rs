//! The resync step: an agent restarted while it holds its mirrors, until it
//! has its DesiredSet again, with where the time went by the agent's log
//! and metrics.

use std::time::{Duration, Instant};

use jobrelay_testbed::go::controlplane::seconds;
use jobrelay_testbed::relay::{Relay, SESSION_OPEN, inventory_in, metric_in};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

/// What the agent logs when its process starts; after it, [`SESSION_OPEN`]
/// (its caches listed, its Hello answered).
const STARTING: &str = "agent starting";
/// The agent's count of DesiredSets received, and when the last came (in
/// seconds since the epoch).
const DESIRED_SETS: &str = "jobrelay_agent_desired_sets_received_total";
const DESIRED_AT: &str = "jobrelay_agent_desired_set_received_timestamp_seconds";

/// One resync: how long in all, and its parts by the agent's log.
#[derive(Debug, Default, Serialize)]
pub(super) struct Resync {
    pub seconds: f64,
    pub mirrors: usize,
    /// The process started → its session open: its watch caches listed
    /// every Job and Pod it holds, then it dialled and said Hello.
    pub to_open_seconds: Option<f64>,
    /// Session open → the DesiredSet received.
    pub to_desired_seconds: Option<f64>,
}

/// Restarts the agent of `worker` while it holds its mirrors, until it has
/// its DesiredSet again.
pub(super) async fn resync(relay: &Relay, worker: &str) -> anyhow::Result<Resync> {
    let before = relay.agent_log(worker).len();
    let killed_at = unix_seconds(Timestamp::now());
    relay.kill_agent(worker);
    let started = Instant::now();
    relay.start_agent(worker)?;
    let since_restart = || {
        relay
            .agent_log(worker)
            .get(before..)
            .unwrap_or_default()
            .to_string()
    };
    // The restarted process counts from zero: its first DesiredSet is the
    // one after the restart, and one noted at or after the kill cannot be
    // the old process's.
    let desired_at = wait::try_until(
        format!("agent {worker} resynced"),
        Duration::from_secs(600),
        || async {
            let text = match relay.agent_metrics(worker).await {
                Ok(text) => text,
                Err(error) => return Seen::Waiting(format!("no metrics yet: {error}")),
            };
            let received = metric_in(&text, DESIRED_SETS).unwrap_or(0.0);
            match metric_in(&text, DESIRED_AT) {
                Some(at) if received >= 1.0 && at >= killed_at => Seen::Ready(at),
                at => Seen::Waiting(format!(
                    "no DesiredSet yet: {received} received, the last at {at:?}"
                )),
            }
        },
    )
    .await?;
    let took = started.elapsed();
    let resync = Resync {
        seconds: took.as_secs_f64(),
        ..parts(&since_restart(), Some(desired_at))
    };
    crate::log(&format!(
        "agent {worker} resynced {} mirrors in {} (started → session open {:.1} s, → DesiredSet {:.1} s)",
        resync.mirrors,
        seconds(took),
        resync.to_open_seconds.unwrap_or(f64::NAN),
        resync.to_desired_seconds.unwrap_or(f64::NAN),
    ));
    Ok(resync)
}

/// The parts of a resync: when the agent started and opened its session
/// (with how many mirrors), each the first such line of its log from its
/// restart on, and when it got its DesiredSet (`desired_at`, in seconds
/// since the epoch, as its metrics tell).
fn parts(log: &str, desired_at: Option<f64>) -> Resync {
    let first = |marker: &str| log.lines().find(|l| l.contains(marker));
    let at = |marker: &str| first(marker).and_then(logged_at).map(unix_seconds);
    let between = |from: Option<f64>, to: Option<f64>| Some(to? - from?);
    let (starting, open) = (at(STARTING), at(SESSION_OPEN));
    let mirrors = first(SESSION_OPEN).and_then(inventory_in).unwrap_or(0);
    Resync {
        mirrors,
        to_open_seconds: between(starting, open),
        to_desired_seconds: between(open, desired_at),
        ..Resync::default()
    }
}

/// `at` in seconds since the epoch, as the agent's metrics tell times.
fn unix_seconds(at: Timestamp) -> f64 {
    at.as_duration().as_secs_f64()
}

/// When a line of jobrelay's log was written, by the timestamp it starts with.
pub(super) fn logged_at(line: &str) -> Option<Timestamp> {
    line.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_come_from_the_first_lines_after_the_restart() {
        let log = "\
2026-11-26T15:00:00.000000Z  INFO jobrelay_agent: agent starting cluster=worker-1
2026-11-26T15:00:01.250000Z  INFO jobrelay_agent::session: session open inventory=5000
2026-11-26T15:00:01.750000Z  INFO jobrelay_agent::session: welcomed by the manager
2026-11-26T15:09:00.000000Z  INFO jobrelay_agent::session: session open inventory=1
";
        let desired_at = "2026-11-26T15:00:02Z".parse().map(unix_seconds).ok();
        let parts = parts(log, desired_at);
        assert_eq!(parts.mirrors, 5000);
        assert_eq!(parts.to_open_seconds, Some(1.25));
        assert_eq!(parts.to_desired_seconds, Some(0.75));
    }

    #[test]
    fn a_part_missing_from_the_log_is_unknown_not_zero() {
        let log = "2026-11-26T15:00:01Z  INFO x: session open inventory=3\n";
        let parts = parts(log, None);
        assert_eq!(parts.mirrors, 3);
        assert_eq!(parts.to_open_seconds, None);
        assert_eq!(parts.to_desired_seconds, None);
    }
}
