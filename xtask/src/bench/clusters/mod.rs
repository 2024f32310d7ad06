//! `cargo xtask bench --clusters N…`: the real manager (leader and follower,
//! release build, production heartbeat and status intervals) on the real
//! manager cluster, with a simulated fleet of workers ([`fleet`]).
//! The workers' cleanup delays are drawn from a direct cleanup measured
//! first on a real worker. First the leader's idle cost per cluster, the
//! fleet grown size by size before any Job; then, on the largest fleet
//! first and shrunk size by size: dispatch of many Jobs over the fleet,
//! status, WorkerCluster status writes, `/metrics`, the reconnect storm
//! after the leader is killed, and cleanup.

mod report;
mod simulated;
mod writes;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jobrelay_testbed::cluster::supervisor::Supervisor;
use jobrelay_testbed::cluster::{ClusterSet, MANAGER};
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::relay::election::lease_holder;
use jobrelay_testbed::relay::registration::register_on;
use jobrelay_testbed::relay::{Options, Relay};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};

use super::shared::figures::Figures;
use super::shared::jobs::{PodPoint, cleanup_until_gone, create_relayed, delete_all, record_pods};
use super::shared::machine;
use super::shared::measure::{self, Point, Timestamps, at_once, wait_all_within};
use crate::{log, supervisor_command, workspace_root};
use report::{Idle, Metrics, Report, Storm};
use simulated::Fleet;
use simulated::worker::CleanupDelays;
use writes::StatusWrites;

/// How long an idle fleet is watched.
const IDLE_WINDOW: Duration = Duration::from_secs(30);
/// Jobs whose status is measured, per size.
const STATUS_JOBS: usize = 500;
/// Direct cleanups measured on the real worker.
const CLEANUP_SAMPLES: usize = 300;
/// The leader's metric of sessions open, and of WorkerClusters shown Connected.
const SESSIONS: &str = "jobrelay_connected_clusters";
const SHOWN_CONNECTED: &str = "jobrelay_cluster_connected";
/// The longest any step may take before the bench gives up.
const STEP_DEADLINE: Duration = Duration::from_secs(1800);

pub async fn run(sizes: &[usize], jobs: usize) -> anyhow::Result<()> {
    jobrelay_testbed::go::upstream::ensure_built(&mut log)?;
    let state_dir = workspace_root()
        .join("target/jobrelay")
        .join(format!("clusters-{}", std::process::id()));
    // One real worker, for the cleanup the simulated ones draw from.
    let supervisor = Supervisor::start(supervisor_command()?, &state_dir, 1, false)?;
    let set = supervisor.set().clone();
    let delays = CleanupDelays::measured(direct_cleanups(&set).await?);
    log(&format!("direct cleanup median {:?}", delays.median()));
    let mut manager_only = set.clone();
    manager_only.clusters.retain(|c| c.name == MANAGER);
    let largest = sizes.iter().copied().max().unwrap_or(2);
    let options = Options {
        manager_replicas: 2,
        manager_args: vec![
            "--heartbeat-interval=5s".into(),
            "--cluster-status-interval=30s".into(),
            // Room for every agent, twice, as docs/operations.md says.
            format!("--relay-max-connections={}", (2 * largest).max(512)),
        ],
        ..super::release_options()
    };
    let relay = Relay::start_with(&manager_only, options).await?;
    let manager = set.manager().client().await?;
    let mut sizes = sizes.to_vec();
    sizes.sort_unstable();
    sizes.dedup();
    // First the idle cost, the fleet grown size by size before any Job, so
    // no step's leftovers (work, or memory the allocator kept) count in it.
    let mut fleet = Fleet::new(delays);
    let idles = idle_sweep(&relay, &manager, &mut fleet, &sizes).await?;
    // Then the Jobs, on the largest fleet first, shrunk size by size.
    let out = workspace_root().join("target").join("bench");
    std::fs::create_dir_all(&out)?;
    let mut reports = Vec::new();
    for (n, idle) in sizes.iter().zip(idles).rev() {
        fleet.shrink_to(*n);
        let report = one_size(&relay, &manager, &mut fleet, *n, jobs, idle).await?;
        let path = out.join(format!("clusters-{n}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
        log(&format!("wrote {}", path.display()));
        reports.insert(0, report);
        report::print(&reports);
    }
    drop(fleet);
    drop(relay);
    supervisor.stop()
}

/// The leader idle with no cluster, then with each size of fleet connected.
async fn idle_sweep(
    relay: &Relay,
    manager: &kube::Client,
    fleet: &mut Fleet,
    sizes: &[usize],
) -> anyhow::Result<Vec<Idle>> {
    let leader = leader_of(manager).await?;
    let empty = idle(relay, leader).await?;
    let mut previous = empty.clone();
    let mut readings = Vec::new();
    for &n in sizes {
        let names = simulated::names(n);
        let new = &names[fleet.len()..];
        register_on(manager.clone(), new.iter().map(String::as_str)).await?;
        fleet.grow(new, &relay.manager_urls(), relay.ca())?;
        let leader = leader_of(manager).await?;
        wait_counted(relay, leader, SESSIONS, n).await?;
        wait_counted(relay, leader, SHOWN_CONNECTED, n).await?;
        log(&format!("{n} simulated clusters connected"));
        let reading = idle(relay, leader)
            .await?
            .per_cluster(&empty, &previous, new.len(), n);
        previous = reading.clone();
        readings.push(reading);
    }
    Ok(readings)
}

/// The direct cleanup on the real worker: Jobs with a running Pod deleted
/// at once with Background propagation, until Job and Pod are gone.
async fn direct_cleanups(set: &ClusterSet) -> anyhow::Result<Vec<Duration>> {
    let ns = "bench-direct-cleanup";
    let worker = set.workers()[0].client().await?;
    kit::create_namespace(&worker, ns).await;
    let names: Vec<String> = (0..CLEANUP_SAMPLES)
        .map(|i| format!("direct-{i}"))
        .collect();
    let jobs: Api<Job> = Api::namespaced(worker.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(worker, ns);
    let running: Timestamps = Default::default();
    let watch = record_pods(pods.clone(), PodPoint::Running, running.clone())
        .listed()
        .await?;
    at_once(&names, |name| {
        let (jobs, job) = (jobs.clone(), TestJob::new(ns, &name).run_for("1h").build());
        async move { jobs.create(&PostParams::default(), &job).await.map(|_| ()) }
    })
    .await?;
    wait_all_within("direct Pods running", &names, &running, STEP_DEADLINE).await?;
    watch.stop();
    let (deleted, done) = cleanup_until_gone(&jobs, &pods, &names).await?;
    Ok(names
        .iter()
        .filter_map(|n| Some(done.get(n)?.saturating_duration_since(*deleted.get(n)?)))
        .collect())
}

async fn leader_of(manager: &kube::Client) -> anyhow::Result<usize> {
    Ok(
        wait::try_until("a manager replica leads", STEP_DEADLINE, || async {
            match lease_holder(manager).await {
                Some(index) => Seen::Ready(index),
                None => Seen::Waiting("no holder".into()),
            }
        })
        .await?,
    )
}

async fn one_size(
    relay: &Relay,
    manager: &kube::Client,
    fleet: &mut Fleet,
    n: usize,
    jobs: usize,
    idle: Idle,
) -> anyhow::Result<Report> {
    let started = Instant::now();
    let mut leader = leader_of(manager).await?;
    wait_counted(relay, leader, SESSIONS, n).await?;
    let writes = StatusWrites::start(manager).await?;

    let ns = format!("bench-clusters-{n}");
    kit::create_namespace(manager, &ns).await;
    let api: Api<Job> = Api::namespaced(manager.clone(), &ns);
    let dispatch_names: Vec<String> = (0..jobs).map(|i| format!("d-{i}")).collect();
    let leader_cpu = machine::cpu_seconds_of(relay.replica_pid(leader).unwrap_or(0));
    let created = at_once(&dispatch_names, create_relayed(&api, "1h")).await?;
    let uids = uids(&api).await?;
    let applied = wait_applied(fleet, &uids, &dispatch_names).await?;
    let dispatch_cpu = machine::cpu_seconds_of(relay.replica_pid(leader).unwrap_or(0)) - leader_cpu;
    let dispatch = Figures::between(&dispatch_names, &created, &applied);
    log(&format!("dispatch: {:.0} Jobs/s", dispatch.jobs_per_second));
    let per_cluster = fleet.record.per_cluster(uids.keys());
    let spread = (
        per_cluster.values().copied().min().unwrap_or(0),
        per_cluster.values().copied().max().unwrap_or(0),
    );

    let status = status(&api, fleet).await?;
    let metrics = Metrics::scrape(relay, leader).await?;
    let status_writes = writes.stop();
    let storm = storm(relay, manager, fleet, &mut leader, n).await?;

    let all: Vec<String> = api
        .list_metadata(&ListParams::default())
        .await?
        .items
        .iter()
        .map(|j| j.name_any())
        .collect();
    let gone: Timestamps = Default::default();
    let watch = measure::record(api.clone(), Point::Gone, gone.clone())
        .listed()
        .await?;
    let deleted = delete_all(&api, &all).await?;
    let gone = wait_all_within("manager Jobs released", &all, &gone, STEP_DEADLINE).await?;
    watch.stop();
    // The running Jobs' cleanup: the finished ones' mirrors went already.
    let cleanup = Figures::between(&dispatch_names, &deleted, &gone);
    log(&format!("cleanup: {:.0} Jobs/s", cleanup.jobs_per_second));
    Ok(Report {
        clusters: n,
        jobs,
        idle,
        status_writes,
        dispatch,
        dispatch_leader_cpu_ms_per_job: dispatch_cpu * 1000.0 / jobs.max(1) as f64,
        mirrors_per_cluster_least_most: spread,
        status,
        metrics,
        storm,
        cleanup,
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}

/// Waits until the leader's `metric`, summed over its labels, is `n`:
/// `jobrelay_connected_clusters` counts sessions, `jobrelay_cluster_connected`
/// the WorkerClusters whose status shows them Connected.
async fn wait_counted(relay: &Relay, leader: usize, metric: &str, n: usize) -> anyhow::Result<()> {
    Ok(
        wait::try_until(format!("{metric} at {n}"), STEP_DEADLINE, || async {
            let text = relay.replica_metrics(leader).await.unwrap_or_default();
            let count = summed(&text, metric);
            match count as usize == n {
                true => Seen::Ready(()),
                false => Seen::Waiting(format!("{count}")),
            }
        })
        .await?,
    )
}

/// The samples of `metric` in a `/metrics` text, summed over their labels.
fn summed(text: &str, metric: &str) -> f64 {
    text.lines()
        .filter(|l| l.split(['{', ' ']).next() == Some(metric))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// The leader's cost with the clusters connected and nothing to do.
async fn idle(relay: &Relay, leader: usize) -> anyhow::Result<Idle> {
    let pid = relay.replica_pid(leader).unwrap_or(0);
    // Sessions settle: heartbeats and keepalives only from here on.
    tokio::time::sleep(IDLE_WINDOW / 3).await;
    let cpu = machine::cpu_seconds_of(pid);
    tokio::time::sleep(IDLE_WINDOW).await;
    let cpu = machine::cpu_seconds_of(pid) - cpu;
    Ok(Idle::measured(machine::rss_kib(pid), cpu, IDLE_WINDOW))
}

/// Origin UID → manager Job name, for every Job in `api`'s namespace.
async fn uids(api: &Api<Job>) -> anyhow::Result<HashMap<String, String>> {
    let list = api.list_metadata(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter_map(|j| Some((j.uid()?, j.name_any())))
        .collect())
}

/// When each of `names` was applied on a simulated worker, by name.
async fn wait_applied(
    fleet: &Fleet,
    uids: &HashMap<String, String>,
    names: &[String],
) -> anyhow::Result<HashMap<String, Instant>> {
    Ok(
        wait::try_until("every mirror applied", STEP_DEADLINE, || async {
            let applied: HashMap<String, Instant> = fleet
                .record
                .applied_at()
                .into_iter()
                .filter_map(|(uid, at)| Some((uids.get(&uid)?.clone(), at)))
                .collect();
            let missing = names.iter().filter(|n| !applied.contains_key(*n)).count();
            match missing {
                0 => Seen::Ready(applied),
                _ => Seen::Waiting(format!("{missing} not applied")),
            }
        })
        .await?,
    )
}

/// Short Jobs over the fleet: from the simulated worker reporting one
/// Complete to the manager Job showing it.
async fn status(api: &Api<Job>, fleet: &Fleet) -> anyhow::Result<Figures> {
    let names: Vec<String> = (0..STATUS_JOBS).map(|i| format!("s-{i}")).collect();
    let shown: Timestamps = Default::default();
    let watch = measure::record(api.clone(), Point::Finished, shown.clone())
        .listed()
        .await?;
    at_once(&names, create_relayed(api, "3s")).await?;
    let shown = wait_all_within("statuses shown", &names, &shown, STEP_DEADLINE).await?;
    watch.stop();
    let uids = uids(api).await?;
    let reported: HashMap<String, Instant> = fleet
        .record
        .completed_at()
        .into_iter()
        .filter_map(|(uid, at)| Some((uids.get(&uid)?.clone(), at)))
        .collect();
    Ok(Figures::between(&names, &reported, &shown))
}

/// The leader killed while the fleet holds its mirrors: until another
/// replica leads, and until every cluster has a new session with it and its
/// DesiredSet. Nothing may be deleted or applied elsewhere meanwhile.
async fn storm(
    relay: &Relay,
    manager: &kube::Client,
    fleet: &Fleet,
    leader: &mut usize,
    n: usize,
) -> anyhow::Result<Storm> {
    let (elsewhere, reapplied) = fleet.record.applied_twice();
    let deletes = fleet.record.deletes().len();
    let killed = *leader;
    let at = Instant::now();
    relay.kill_replica(killed);
    let successor = wait::try_until("another replica leads", STEP_DEADLINE, || async {
        match lease_holder(manager).await {
            Some(index) if index != killed => Seen::Ready(index),
            other => Seen::Waiting(format!("{other:?}")),
        }
    })
    .await?;
    let led = at.elapsed();
    let resynced = wait::try_until("every cluster resynced", STEP_DEADLINE, || async {
        let sessions = fleet.record.sessions();
        let done: Vec<Instant> = sessions
            .values()
            .filter(|s| s.opened > at)
            .filter_map(|s| s.desired)
            .collect();
        match done.len() >= n {
            true => Seen::Ready(done.into_iter().max().unwrap_or(at)),
            false => Seen::Waiting(format!("{} of {n} resynced", done.len())),
        }
    })
    .await?;
    let (elsewhere_after, reapplied_after) = fleet.record.applied_twice();
    relay.start_replica(killed)?;
    relay.wait_replica_ready(killed).await?;
    *leader = successor;
    Ok(Storm {
        lease_taken_seconds: led.as_secs_f64(),
        all_resynced_seconds: resynced.saturating_duration_since(at).as_secs_f64(),
        applied_on_another_cluster: elsewhere_after - elsewhere,
        applied_again: reapplied_after - reapplied,
        deleted: fleet.record.deletes().len() - deletes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_is_summed_over_its_labels_and_no_other_is() {
        let text = "# TYPE x gauge\njobrelay_connected_clusters 3\njobrelay_cluster_connected{cluster=\"a\"} 1\njobrelay_cluster_connected{cluster=\"b\"} 0\njobrelay_cluster_connected{cluster=\"c\"} 1\n";
        assert_eq!(summed(text, SESSIONS), 3.0);
        assert_eq!(summed(text, SHOWN_CONNECTED), 2.0);
    }
}
