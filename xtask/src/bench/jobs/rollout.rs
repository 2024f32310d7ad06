//! Takeover during a rolling update, done as the chart's Deployment does it
//! (two replicas, maxSurge 1, maxUnavailable 0): a new replica is started
//! and Ready first, then the leader gets SIGTERM and releases the Lease on
//! its way out. From the SIGTERM until another replica holds the Lease,
//! until every agent has a session with it, and until a Job created just
//! after is dispatched. The other old replica is then replaced the same way,
//! which leaves two replicas again, as the rollout does.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jobrelay_testbed::cluster::ClusterSet;
use jobrelay_testbed::relay::election::{LEASE, LEASE_NAMESPACE, holder_of, lease_holder};
use jobrelay_testbed::relay::{Relay, agent_connected};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use serde::Serialize;

use super::resync::logged_at;
use crate::bench::shared::jobs::{delete_all, relayed};
use crate::bench::shared::measure::{self, Recording, wait_all};
use crate::log;

/// How long a stopping replica may take before the kubelet would kill it
/// (Kubernetes' default `terminationGracePeriodSeconds`).
const GRACE: Duration = Duration::from_secs(30);
/// The longest the Lease, or the agents' sessions, may take to move.
const MOVE_WITHIN: Duration = Duration::from_secs(120);

/// The leader's handover in a rollout, each counted from its SIGTERM.
#[derive(Debug, Default, Serialize)]
pub(super) struct Rollout {
    /// → another replica holds the Lease (a watch of the Lease saw it).
    pub lease_seconds: f64,
    /// → every agent has a session with that replica (the first `agent
    /// connected` line of each in its log).
    pub sessions_seconds: f64,
    /// → the mirror of a Job created just after the SIGTERM seen on a worker.
    pub dispatch_seconds: f64,
}

/// Who held the Lease each time that changed, and when a watch saw it.
type Holders = Arc<Mutex<Vec<(Option<usize>, Instant)>>>;

/// Replaces the running replicas one by one, the leader first, each by a
/// new one started and Ready before it is stopped; measures the leader's
/// handover.
pub(crate) async fn takeover_in_rollout(
    set: &ClusterSet,
    relay: &Relay,
    n: usize,
) -> anyhow::Result<Rollout> {
    let ns = format!("bench-rollout-{n}");
    let (mut watches, mirrored) = super::replicas::mirrors_seen(set, &ns).await?;
    let manager = set.manager().client().await?;
    let workers: Vec<String> = set.workers().iter().map(|w| w.name.clone()).collect();
    let (holders_watch, holders) = record_holders(manager.clone()).await?;
    watches.push(holders_watch);
    let old: Vec<usize> = (0..relay.replicas())
        .filter(|&i| relay.replica_pid(i).is_some())
        .collect();
    let surge = (0..relay.replicas())
        .find(|&i| relay.replica_pid(i).is_none())
        .ok_or_else(|| anyhow::anyhow!("no replica left for the surge (Options::manager_surge)"))?;
    // As in a Deployment, every old replica is Ready before the rollout.
    for &replica in &old {
        relay.wait_replica_ready(replica).await?;
    }
    let leader = lease_holder(&manager)
        .await
        .ok_or_else(|| anyhow::anyhow!("no manager replica holds the Lease"))?;

    relay.start_replica(surge)?;
    relay.wait_replica_ready(surge).await?;
    let jobs: Api<Job> = Api::namespaced(manager.clone(), &ns);
    let names = vec!["after-the-sigterm".to_string()];
    let stopping = Stopping::signal(relay, leader)?;
    jobs.create(&PostParams::default(), &relayed(&ns, &names[0], "1s"))
        .await?;
    let dispatched = wait_all("a Job dispatched during the rollout", &names, &mirrored).await?;
    let moved = moved_from(relay, &holders, &workers, &stopping).await?;
    let rollout = Rollout {
        lease_seconds: moved.lease_at.duration_since(stopping.at).as_secs_f64(),
        sessions_seconds: moved
            .sessions_at
            .duration_since(stopping.wall)
            .as_secs_f64(),
        dispatch_seconds: dispatched[&names[0]]
            .duration_since(stopping.at)
            .as_secs_f64(),
    };
    log(&format!(
        "manager-{leader} stopped for a rollout; manager-{} took the Lease after {:.1} s, \
         every agent's session after {:.1} s, dispatched after {:.1} s",
        moved.leader, rollout.lease_seconds, rollout.sessions_seconds, rollout.dispatch_seconds
    ));
    ended(relay, leader).await?;

    // The rest of the rollout: a new replica where the old one was, Ready,
    // then the next old one stopped (handing the Lease over if it leads).
    let mut free = leader;
    for &replica in old.iter().filter(|&&i| i != leader) {
        relay.start_replica(free)?;
        relay.wait_replica_ready(free).await?;
        let led = lease_holder(&manager).await == Some(replica);
        let stopping = Stopping::signal(relay, replica)?;
        if led {
            let moved = moved_from(relay, &holders, &workers, &stopping).await?;
            log(&format!(
                "manager-{replica} stopped; manager-{} leads",
                moved.leader
            ));
        }
        ended(relay, replica).await?;
        free = replica;
    }
    watches.iter().for_each(Recording::stop);
    delete_all(&jobs, &names).await?;
    Ok(rollout)
}

/// A replica told to stop: which, when (by this process's clock and the
/// wall clock the logs are written with), and how long each replica's log
/// was then.
struct Stopping {
    replica: usize,
    at: Instant,
    wall: Timestamp,
    logs_from: Vec<usize>,
}

impl Stopping {
    /// Sends SIGTERM to manager replica `replica`.
    fn signal(relay: &Relay, replica: usize) -> anyhow::Result<Self> {
        let logs_from = (0..relay.replicas())
            .map(|i| relay.replica_log(i).len())
            .collect();
        relay.signal_replica(replica, libc::SIGTERM)?;
        Ok(Stopping {
            replica,
            at: Instant::now(),
            wall: Timestamp::now(),
            logs_from,
        })
    }
}

/// Where the Lease and the agents went after a SIGTERM, and when.
struct Moved {
    leader: usize,
    lease_at: Instant,
    sessions_at: Timestamp,
}

/// Waits until another replica holds the Lease, then until every agent of
/// `workers` has opened a session with it.
async fn moved_from(
    relay: &Relay,
    holders: &Holders,
    workers: &[String],
    stopping: &Stopping,
) -> anyhow::Result<Moved> {
    let (leader, lease_at) = wait::try_until(
        format!("the Lease taken from manager-{}", stopping.replica),
        MOVE_WITHIN,
        || {
            let noted = lock(holders).clone();
            let taken = taken_from(&noted, stopping.replica, stopping.at);
            let last = noted.last().map(|(holder, _)| *holder);
            async move {
                match taken {
                    Some(taken) => Seen::Ready(taken),
                    None => Seen::Waiting(format!("held by {last:?}")),
                }
            }
        },
    )
    .await?;
    let from = stopping.logs_from.get(leader).copied().unwrap_or(0);
    let sessions_at = wait::try_until(
        format!("every agent's session with manager-{leader}"),
        MOVE_WITHIN,
        || {
            let log = relay.replica_log(leader);
            let seen = all_connected_at(log.get(from..).unwrap_or_default(), workers);
            async move {
                match seen {
                    Ok(at) => Seen::Ready(at),
                    Err(missing) => Seen::Waiting(format!("no session yet of {missing:?}")),
                }
            }
        },
    )
    .await?;
    Ok(Moved {
        leader,
        lease_at,
        sessions_at,
    })
}

/// Waits until stopped replica `replica` has ended, as the kubelet would
/// before it kills it; an unclean end is logged.
async fn ended(relay: &Relay, replica: usize) -> anyhow::Result<()> {
    let status = relay.wait_replica_exited(replica, GRACE).await?;
    if !status.success() {
        log(&format!("manager-{replica} ended on SIGTERM with {status}"));
    }
    Ok(())
}

/// Notes, from now on, each change of the Lease's holder.
async fn record_holders(manager: kube::Client) -> anyhow::Result<(Recording, Holders)> {
    let holders: Holders = Default::default();
    let noted = holders.clone();
    let leases: Api<Lease> = Api::namespaced(manager, LEASE_NAMESPACE);
    let recording = measure::recording(leases, move |event, now| {
        if let watcher::Event::Apply(lease) | watcher::Event::InitApply(lease) = event
            && lease.name_any() == LEASE
        {
            let holder = holder_of(&lease);
            let mut noted = lock(&noted);
            if noted.last().map(|(last, _)| *last) != Some(holder) {
                noted.push((holder, now));
            }
        }
    });
    Ok((recording.listed().await?, holders))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The first replica other than `old` seen holding the Lease since `since`,
/// and when.
fn taken_from(
    holders: &[(Option<usize>, Instant)],
    old: usize,
    since: Instant,
) -> Option<(usize, Instant)> {
    holders
        .iter()
        .filter(|(_, at)| *at >= since)
        .find_map(|&(holder, at)| Some((holder.filter(|&h| h != old)?, at)))
}

/// When every one of `clusters` had opened a session, by the first line of
/// each in a manager replica's `log` saying so; else the clusters that have
/// not yet.
fn all_connected_at(log: &str, clusters: &[String]) -> Result<Timestamp, Vec<String>> {
    let mut latest: Option<Timestamp> = None;
    let mut missing = Vec::new();
    for cluster in clusters {
        let first = log
            .lines()
            .filter(|line| agent_connected(line, cluster))
            .find_map(logged_at);
        match first {
            Some(at) => latest = latest.max(Some(at)),
            None => missing.push(cluster.clone()),
        }
    }
    match latest {
        Some(at) if missing.is_empty() => Ok(at),
        _ => Err(missing),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_is_taken_by_the_first_other_holder_after_the_stop() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let holders = [
            (Some(1), at(0)),
            (Some(0), at(5)),
            (None, at(11)),
            (Some(2), at(12)),
            (Some(0), at(20)),
        ];
        assert_eq!(taken_from(&holders, 0, at(10)), Some((2, at(12))));
        // A holder before the stop does not count; nor does the old one.
        assert_eq!(taken_from(&holders, 2, at(13)), Some((0, at(20))));
        assert_eq!(taken_from(&holders, 0, at(21)), None);
    }

    #[test]
    fn sessions_moved_when_the_last_cluster_first_connected() {
        let line = |time: &str, cluster: &str| {
            format!(
                "{time}  INFO session{{cluster={cluster} agent_version=0.1.0}}: \
                 jobrelay_manager::session: agent connected inventory=0 desired=0\n"
            )
        };
        let clusters = ["worker-1".to_string(), "worker-2".to_string()];
        let log = [
            line("2026-11-27T10:00:01.5Z", "worker-2"),
            "2026-11-27T10:00:01.7Z  INFO jobrelay_manager: serving\n".to_string(),
            line("2026-11-27T10:00:02.25Z", "worker-1"),
            line("2026-11-27T10:00:09Z", "worker-2"),
        ]
        .concat();
        let expected: Timestamp = "2026-11-27T10:00:02.25Z".parse().unwrap();
        assert_eq!(all_connected_at(&log, &clusters), Ok(expected));
        let one = line("2026-11-27T10:00:01.5Z", "worker-2");
        assert_eq!(
            all_connected_at(&one, &clusters),
            Err(vec!["worker-1".to_string()])
        );
    }
}
