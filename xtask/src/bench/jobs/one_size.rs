//! One run at N Jobs: every step in order, and the report it fills.

use std::collections::{BTreeMap, HashMap};

use jobrelay_testbed::cluster::ClusterSet;
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::relay::Relay;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde::Serialize;

use super::{backlog, ceiling, load, replicas, resync, rollout, status, upkeep};
use crate::bench::shared::figures::{Figures, ratio};
use crate::bench::shared::histogram;
use crate::bench::shared::jobs::{
    PodPoint, SETTLE, cleanup_until_gone, create_rate, create_relayed, delete_all, record_pods,
    settled, suffixed,
};
use crate::bench::shared::machine::{Run, Spent};
use crate::bench::shared::measure::{self, Point, Timestamps, at_once, wait_all};
use crate::bench::shared::requests::Count;
use crate::log;

/// The steps whose CPU the bounds of [`ceiling`] are taken from.
const DISPATCH_UNTIL_RUNNING: &str = "dispatch until every Pod running";
const CLEANUP: &str = "cleanup";
const STATUS_AND_BURST: &str = "status and burst";
const RAW_RUN: &str = "raw run";
const CLEANUP_DIRECT: &str = "cleanup direct";

/// Everything measured for one N.
#[derive(Debug, Serialize)]
pub(super) struct Report {
    #[serde(flatten)]
    pub(super) run: Run,
    pub(super) raw_create_worker_jobs_per_second: f64,
    /// Jobs created straight on a worker until their Pods run.
    pub(super) raw_run_worker: Figures,
    /// Manager Jobs created until their mirrors' Pods run.
    pub(super) dispatch_running: Figures,
    pub(super) raw_create_manager_jobs_per_second: f64,
    pub(super) dispatch: Figures,
    pub(super) dispatch_ratio_to_raw_worker: f64,
    /// Dispatch → Pod running in Jobs/s, over the raw run's.
    pub(super) dispatch_running_ratio_to_raw_run: f64,
    pub(super) status: Figures,
    /// By the manager's own account, for the status step: worker finished →
    /// the manager heard it from the agent, and → the manager wrote it; and
    /// the write request alone.
    pub(super) status_heard: histogram::Bounds,
    pub(super) status_write: histogram::Bounds,
    pub(super) status_written: histogram::Bounds,
    /// Status writes the manager made per Job of the status step.
    pub(super) status_writes_per_job: f64,
    /// N short Jobs created at once straight on a worker → each finished.
    pub(super) burst_raw: Figures,
    /// The status step's N short manager Jobs: created → shown finished.
    pub(super) burst: Figures,
    /// How long the burst took through jobrelay, over the raw burst's time.
    pub(super) burst_time_ratio_to_raw: f64,
    /// Manager Jobs offered at `offered_per_second` → mirror exists.
    pub(super) offered: Figures,
    pub(super) offered_per_second: f64,
    /// By the manager's own account, for the offered-load step: mirror sent
    /// → the agent reported it held.
    pub(super) offered_held: histogram::Bounds,
    pub(super) cleanup: Figures,
    /// By the manager's own account, for the cleanup step: DeleteMirror sent
    /// → the agent confirmed the mirror and every Pod gone.
    pub(super) cleanup_confirmed: histogram::Bounds,
    pub(super) cleanup_direct: Figures,
    pub(super) cleanup_ratio_to_direct: f64,
    pub(super) resync: resync::Resync,
    /// The leader killed → the first Job dispatched by its successor.
    pub(super) takeover_seconds: f64,
    /// The leader stopped with SIGTERM in a rolling update → the Lease, the
    /// agents' sessions, and a Job's dispatch with another replica.
    pub(super) takeover_in_rollout: rollout::Rollout,
    /// Before the backlog step.
    pub(super) peak_rss_mib: HashMap<String, u64>,
    /// After it: the manager has cached thousands more Jobs.
    pub(super) peak_rss_mib_with_backlog: HashMap<String, u64>,
    /// The leader's peak RSS (MiB) as it stood after each step, in order:
    /// the step whose figure first reaches the peak is where it happened.
    pub(super) leader_peak_rss_mib_after: Vec<(String, u64)>,
    /// CPU seconds per program during each step: where the time went.
    pub(super) cpu_seconds: BTreeMap<String, BTreeMap<String, f64>>,
    /// The requests each client made of each API server during each step,
    /// per Job, from the API servers' audit logs.
    pub(super) requests: BTreeMap<String, Vec<Count>>,
    /// CPU seconds per second each API server spent before the steps, with
    /// nothing moving.
    pub(super) api_upkeep_cores: BTreeMap<String, f64>,
    /// The workers' API servers' CPU per relayed Job beside a direct one,
    /// that upkeep taken out.
    pub(super) workers_api: upkeep::WorkersApi,
    /// Times manager or agents logged that requests waited for their
    /// client-side rate limit (`--kube-api-qps`).
    pub(super) client_rate_limit_reached: usize,
    /// Manager reconciles that failed (each is retried) since the bench began.
    pub(super) failed_reconciles: usize,
    /// Dispatch while a retention backlog is worked off.
    pub(super) beside_backlog: backlog::Backlog,
    /// The machine's cores, and what they allowed at best: dispatch → Pod
    /// running over the raw run, cleanup over the direct cleanup, and the
    /// least time the burst could take over the raw burst's.
    pub(super) cores: usize,
    pub(super) dispatch_running_ceiling: ceiling::Bound,
    pub(super) cleanup_ceiling: ceiling::Bound,
    pub(super) burst_floor: ceiling::Bound,
}

pub(super) async fn bench(set: &ClusterSet, relay: &Relay, n: usize) -> anyhow::Result<Report> {
    let run = Run::start(n);
    let ns = format!("bench-{n}");
    let raw_ns = format!("bench-raw-{n}");
    for cluster in &set.clusters {
        let client = cluster.client().await?;
        kit::create_namespace(&client, &ns).await;
        kit::create_namespace(&client, &raw_ns).await;
    }
    let manager = set.manager().client().await?;
    let names: Vec<String> = (0..n).map(|i| format!("job-{i}")).collect();
    let mut spent = Spent::new(set, n);
    let api_upkeep_cores = upkeep::measure(&spent).await;
    let mut leader_peak = Vec::new();
    let leader_peak_rss = || async {
        let rss = replicas::peak_rss(set, relay).await?;
        anyhow::Ok(rss.get("manager").copied().unwrap_or(0))
    };
    let raw = raw_limits(set, &raw_ns, &names, &mut spent).await?;

    // Dispatch, resync and cleanup through jobrelay.
    let jobs: Api<Job> = Api::namespaced(manager.clone(), &ns);
    let mirrored: Timestamps = Default::default();
    let released: Timestamps = Default::default();
    let mut watches = vec![
        measure::record(jobs.clone(), Point::Gone, released.clone())
            .listed()
            .await?,
    ];
    let mirror_running: Timestamps = Default::default();
    for w in set.workers() {
        let client = w.client().await?;
        let pods = Api::<Pod>::namespaced(client.clone(), &ns);
        watches.push(
            record_pods(pods, PodPoint::Running, mirror_running.clone())
                .listed()
                .await?,
        );
        watches.push(
            measure::record(Api::namespaced(client, &ns), Point::Seen, mirrored.clone())
                .listed()
                .await?,
        );
    }
    log(&format!("creating {n} manager Jobs"));
    let before = spent.sample();
    let created = at_once(&names, create_relayed(&jobs, "1h")).await?;
    let mirrored = wait_all("every mirror on its worker", &names, &mirrored).await?;
    let dispatch = Figures::between(&names, &created, &mirrored);
    spent.record("dispatch", &before);
    let mirror_running = wait_all("every mirror's Pod running", &names, &mirror_running).await?;
    spent.record(DISPATCH_UNTIL_RUNNING, &before);
    let dispatch_running = Figures::between(&names, &created, &mirror_running);
    leader_peak.push(("dispatch".to_string(), leader_peak_rss().await?));

    let resynced_worker = set.workers()[0].name.clone();
    let resync = resync::resync(relay, &resynced_worker).await?;
    leader_peak.push(("resync".to_string(), leader_peak_rss().await?));

    log(&format!("deleting {n} manager Jobs"));
    let before = spent.sample();
    let metrics_before = relay.metrics().await?;
    let deleted = delete_all(&jobs, &names).await?;
    let released = wait_all("every manager Job released and gone", &names, &released).await?;
    let cleanup = Figures::between(&names, &deleted, &released);
    let cleanup_confirmed = status::manager_account(
        &metrics_before,
        &relay.metrics().await?,
        "jobrelay_cleanup_seconds",
    );
    spent.record(CLEANUP, &before);
    watches.iter().for_each(|w| w.stop());
    leader_peak.push((CLEANUP.to_string(), leader_peak_rss().await?));

    let before = spent.sample();
    let (status, burst, account) = status::status(set, relay, &jobs, &names).await?;
    spent.record(STATUS_AND_BURST, &before);
    settled(set, &ns, SETTLE).await?;
    leader_peak.push((STATUS_AND_BURST.to_string(), leader_peak_rss().await?));
    let offered_per_second = raw.run.jobs_per_second * load::OFFERED_SHARE;
    let before = spent.sample();
    let metrics_before = relay.metrics().await?;
    let offered = load::offered(set, &jobs, &suffixed(&names, "o"), offered_per_second).await?;
    let offered_held = status::manager_account(
        &metrics_before,
        &relay.metrics().await?,
        "jobrelay_dispatch_seconds",
    );
    spent.record("offered load", &before);
    let peak_rss_mib = replicas::peak_rss(set, relay).await?;
    leader_peak.push(("offered load".to_string(), leader_peak_rss().await?));
    let beside_backlog = backlog::dispatch_beside(set, relay, n).await?;
    let peak_rss_mib_with_backlog = replicas::peak_rss(set, relay).await?;
    let takeover = replicas::takeover(set, relay, n).await?;
    let takeover_in_rollout = rollout::takeover_in_rollout(set, relay, n).await?;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let workers_api = upkeep::WorkersApi::of(
        &spent,
        &api_upkeep_cores,
        &set.manager().name,
        n,
        [DISPATCH_UNTIL_RUNNING, RAW_RUN, CLEANUP, CLEANUP_DIRECT],
    );
    let step = |name: &str| spent.by_step.get(name).cloned().unwrap_or_default();
    let manager_cluster = &set.manager().name;
    let rate_ceiling = |name: &str, limit: &Figures| {
        ceiling::rate_ceiling(
            cores as f64,
            &step(name),
            manager_cluster,
            n,
            limit.jobs_per_second,
        )
    };
    let dispatch_running_ceiling = rate_ceiling(DISPATCH_UNTIL_RUNNING, &raw.run);
    let cleanup_ceiling = rate_ceiling(CLEANUP, &raw.cleanup_direct);
    let dispatch_running_ratio_to_raw_run =
        ratio(dispatch_running.jobs_per_second, raw.run.jobs_per_second);
    let burst_floor = ceiling::time_floor(
        cores as f64,
        &step(STATUS_AND_BURST),
        manager_cluster,
        raw.burst.seconds,
    );
    Ok(Report {
        run: run.ended(),
        raw_create_worker_jobs_per_second: raw.worker_rate,
        dispatch_running,
        raw_create_manager_jobs_per_second: raw.manager_rate,
        dispatch_ratio_to_raw_worker: ratio(dispatch.jobs_per_second, raw.worker_rate),
        dispatch,
        dispatch_running_ratio_to_raw_run,
        status,
        status_heard: account.heard,
        status_write: account.write,
        status_written: account.written,
        status_writes_per_job: account.writes_per_job,
        burst_time_ratio_to_raw: ratio(burst.seconds, raw.burst.seconds),
        burst_raw: raw.burst,
        burst,
        offered,
        offered_per_second,
        offered_held,
        cleanup_ratio_to_direct: ratio(cleanup.jobs_per_second, raw.cleanup_direct.jobs_per_second),
        cleanup,
        cleanup_confirmed,
        cleanup_direct: raw.cleanup_direct,
        resync,
        takeover_seconds: takeover.as_secs_f64(),
        takeover_in_rollout,
        peak_rss_mib,
        peak_rss_mib_with_backlog,
        raw_run_worker: raw.run,
        leader_peak_rss_mib_after: leader_peak,
        cpu_seconds: spent.by_step,
        requests: spent.requests_by_step,
        api_upkeep_cores,
        workers_api,
        client_rate_limit_reached: logged(relay, set, "kube client rate limit reached"),
        failed_reconciles: logged(relay, set, "reconcile failed"),
        beside_backlog,
        cores,
        dispatch_running_ceiling,
        cleanup_ceiling,
        burst_floor,
    })
}

/// How many lines of the manager's and the agents' logs hold `marker`.
fn logged(relay: &Relay, set: &ClusterSet, marker: &str) -> usize {
    let agents: usize = set
        .workers()
        .iter()
        .map(|w| relay.agent_log(&w.name).matches(marker).count())
        .sum();
    relay.manager_log().matches(marker).count() + agents
}

/// What the clusters do without jobrelay: the physical limits its figures
/// are compared with.
struct RawLimits {
    /// Jobs no controller acts on, created on the manager, per second.
    manager_rate: f64,
    /// Jobs created straight on a worker, per second.
    worker_rate: f64,
    /// Those Jobs, created until their Pods run.
    run: Figures,
    /// Those Jobs deleted with Background propagation until Job and Pod are gone.
    cleanup_direct: Figures,
    /// N short Jobs created at once on a worker until each finished.
    burst: Figures,
}

async fn raw_limits(
    set: &ClusterSet,
    raw_ns: &str,
    names: &[String],
    spent: &mut Spent,
) -> anyhow::Result<RawLimits> {
    let manager = set.manager().client().await?;
    let worker = set.workers()[0].client().await?;
    // Raw limit on the manager: Jobs no controller acts on.
    let raw_manager: Api<Job> = Api::namespaced(manager, raw_ns);
    let (manager_rate, _) = create_rate(&raw_manager, names, |name| {
        TestJob::new(raw_ns, name)
            .managed_by("bench.jobrelay.dev/nobody")
            .build()
    })
    .await?;
    delete_all(&raw_manager, names).await?;
    settled(set, raw_ns, SETTLE).await?;

    // Raw limit on a worker, and the direct cleanup that jobrelay's is
    // compared with: the same Jobs a mirror is, Pods running, deleted with
    // Background propagation, done when Job and Pod are gone.
    let raw_worker: Api<Job> = Api::namespaced(worker.clone(), raw_ns);
    let raw_pods: Api<Pod> = Api::namespaced(worker, raw_ns);
    let running: Timestamps = Default::default();
    let watch = record_pods(raw_pods.clone(), PodPoint::Running, running.clone())
        .listed()
        .await?;
    let before = spent.sample();
    let (worker_rate, raw_created) = create_rate(&raw_worker, names, |name| {
        TestJob::new(raw_ns, name).run_for("1h").build()
    })
    .await?;
    spent.record("raw create on a worker", &before);
    let running = wait_all("raw Pods running", names, &running).await?;
    spent.record(RAW_RUN, &before);
    let run = Figures::between(names, &raw_created, &running);
    watch.stop();
    let before = spent.sample();
    let (deleted, done) = cleanup_until_gone(&raw_worker, &raw_pods, names).await?;
    spent.record(CLEANUP_DIRECT, &before);
    let cleanup_direct = Figures::between(names, &deleted, &done);
    let before = spent.sample();
    let burst = load::raw_burst(&raw_worker, raw_ns, &suffixed(names, "b")).await?;
    spent.record("burst raw", &before);
    settled(set, raw_ns, SETTLE).await?;
    Ok(RawLimits {
        manager_rate,
        worker_rate,
        run,
        cleanup_direct,
        burst,
    })
}
