//! What `cargo xtask bench --clusters` reports per fleet size, and the table
//! of every size measured so far, dispatch set against the smallest fleet's.

use std::time::{Duration, Instant};

use jobrelay_testbed::relay::Relay;
use serde::Serialize;

use super::writes::Written;
use crate::bench::shared::figures::{Figures, ratio};

/// One fleet size's figures.
#[derive(Debug, Serialize)]
pub struct Report {
    pub clusters: usize,
    pub jobs: usize,
    pub idle: Idle,
    /// WorkerCluster status writes from the fleet's connection through the
    /// status step (the storm's condition changes are not in it).
    pub status_writes: Written,
    /// Manager Job created → its mirror applied on a simulated worker.
    pub dispatch: Figures,
    /// The leader's CPU over the dispatch step, per Job.
    pub dispatch_leader_cpu_ms_per_job: f64,
    /// Mirrors on the least and the most loaded cluster after dispatch.
    pub mirrors_per_cluster_least_most: (usize, usize),
    /// A simulated worker reporting Complete → the manager Job showing it.
    pub status: Figures,
    pub metrics: Metrics,
    pub storm: Storm,
    /// Manager Jobs deleted → released (finalizer gone after MirrorGone).
    pub cleanup: Figures,
    pub wall_seconds: f64,
}

/// The leader with the fleet connected and nothing to do.
#[derive(Debug, Clone, Serialize)]
pub struct Idle {
    pub rss_kib: u64,
    pub cpu_ms_per_second: f64,
    /// Above the leader's own with no cluster connected, per cluster.
    pub rss_kib_per_cluster: f64,
    pub cpu_ms_per_second_per_cluster: f64,
}

impl Idle {
    pub fn measured(rss_kib: u64, cpu_seconds: f64, window: Duration) -> Idle {
        let seconds = window.as_secs_f64();
        Idle {
            rss_kib,
            cpu_ms_per_second: cpu_seconds * 1000.0 / seconds,
            rss_kib_per_cluster: 0.0,
            cpu_ms_per_second_per_cluster: 0.0,
        }
    }

    /// This reading with its cost per cluster: CPU above `empty`'s (the
    /// leader with no cluster) over every cluster; memory above
    /// `previous`'s (the size before) over the clusters `added` since.
    pub fn per_cluster(
        mut self,
        empty: &Idle,
        previous: &Idle,
        added: usize,
        clusters: usize,
    ) -> Idle {
        self.rss_kib_per_cluster =
            (self.rss_kib as f64 - previous.rss_kib as f64) / added.max(1) as f64;
        self.cpu_ms_per_second_per_cluster =
            (self.cpu_ms_per_second - empty.cpu_ms_per_second) / clusters.max(1) as f64;
        self
    }
}

/// The leader's `/metrics`.
#[derive(Debug, Serialize)]
pub struct Metrics {
    pub series: usize,
    pub series_per_cluster: f64,
    pub scrape_ms: f64,
}

impl Metrics {
    pub async fn scrape(relay: &Relay, leader: usize) -> anyhow::Result<Metrics> {
        let started = Instant::now();
        let text = relay.replica_metrics(leader).await?;
        let scrape_ms = started.elapsed().as_secs_f64() * 1000.0;
        let series = series(&text);
        let (labelled, named) = series_per_cluster(&text);
        Ok(Metrics {
            series,
            series_per_cluster: labelled as f64 / named.max(1) as f64,
            scrape_ms,
        })
    }
}

/// The samples in a `/metrics` text.
pub fn series(text: &str) -> usize {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count()
}

/// The samples labelled with a cluster, and how many clusters they name
/// (every registered cluster, connected or not).
pub fn series_per_cluster(text: &str) -> (usize, usize) {
    let mut clusters = std::collections::HashSet::new();
    let mut labelled = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some(rest) = line.split("cluster=\"").nth(1)
            && let Some(name) = rest.split('"').next()
        {
            labelled += 1;
            clusters.insert(name);
        }
    }
    (labelled, clusters.len())
}

/// The leader killed with the fleet's mirrors held.
#[derive(Debug, Serialize)]
pub struct Storm {
    /// Kill → another replica holds the Lease.
    pub lease_taken_seconds: f64,
    /// Kill → every cluster has a new session and its DesiredSet.
    pub all_resynced_seconds: f64,
    /// Mirrors applied on a second cluster meanwhile (must be 0).
    pub applied_on_another_cluster: usize,
    /// Mirrors applied again on the cluster holding them.
    pub applied_again: usize,
    /// Deletes sent meanwhile (must be 0: nothing was deleted).
    pub deleted: usize,
}

/// The table of every size so far.
pub fn print(reports: &[Report]) {
    let Some(smallest) = reports.first() else {
        return;
    };
    println!(
        "\n{:>8} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>8}",
        "clusters",
        "idle KiB/c",
        "µs CPU/s/c",
        "refresh/s",
        "disp J/s",
        "vs first",
        "disp p99",
        "status p99",
        "series/c",
        "scrape ms",
        "lease s",
        "resync s",
        "twice/del"
    );
    for r in reports {
        println!(
            "{:>8} {:>9.1} {:>9.1} {:>9.2} {:>8.0} {:>8.2} {:>9} {:>9} {:>8.1} {:>8.1} {:>9.1} {:>9.1} {:>4}/{:<3}",
            r.clusters,
            r.idle.rss_kib_per_cluster,
            r.idle.cpu_ms_per_second_per_cluster * 1000.0,
            r.status_writes.refreshes_per_second,
            r.dispatch.jobs_per_second,
            ratio(
                r.dispatch.jobs_per_second,
                smallest.dispatch.jobs_per_second
            ),
            r.dispatch.p99_ms,
            r.status.p99_ms,
            r.metrics.series_per_cluster,
            r.metrics.scrape_ms,
            r.storm.lease_taken_seconds,
            r.storm.all_resynced_seconds,
            r.storm.applied_on_another_cluster,
            r.storm.deleted,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_cost_per_cluster_is_above_the_empty_managers() {
        let window = Duration::from_secs(10);
        let empty = Idle::measured(50_000, 0.1, window);
        let half = Idle::measured(55_000, 0.3, window);
        let full = Idle::measured(60_000, 0.6, window).per_cluster(&empty, &half, 50, 100);
        assert_eq!(full.rss_kib_per_cluster, 100.0);
        assert!((full.cpu_ms_per_second_per_cluster - 0.5).abs() < 1e-9);
    }

    #[test]
    fn series_are_samples_and_per_cluster_ones_carry_the_label() {
        let text = "# HELP a x\na 1\nb{cluster=\"w1\"} 2\nb{cluster=\"w2\"} 2\nc{cluster=\"w1\",phase=\"x\"} 1\nc_bucket{le=\"1\"} 3\n";
        assert_eq!(series(text), 5);
        assert_eq!(series_per_cluster(text), (3, 2));
    }
}
