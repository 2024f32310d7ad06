//! `cargo xtask bench`: jobrelay measured on the local clusters (1 manager +
//! 2 workers), side by side with what the API servers allow on their own, in
//! one run:
//!
//! - raw limit: N Jobs created straight on a worker, and on the manager, by a
//!   tight concurrent client;
//! - dispatch: N manager Jobs created at once until every mirror exists;
//! - status: a worker Job finished until its manager Job shows it;
//! - burst: N short Jobs created at once until the last shows finished on
//!   the manager, against the same burst straight on a worker;
//! - offered load: manager Jobs created at 0.8 × the raw run's rate until
//!   each mirror exists;
//! - cleanup: N manager Jobs deleted at once until each is released (after
//!   its MirrorGone), against deleting N Jobs straight on a worker with
//!   Background propagation and waiting for their Pods;
//! - resync: an agent restarted while holding its mirrors, until it has its
//!   DesiredSet;
//! - dispatch beside a retention backlog: N Jobs dispatched while 5,000
//!   expired manager Jobs are deleted at the retention pace;
//! - takeover: the leading manager replica (of two, elected with the
//!   default lease settings) killed, until the other has dispatched a Job
//!   created right after the kill;
//! - memory: peak resident memory of the manager replicas and the agents;
//! - CPU: seconds used by each program of the clusters during each step.
//!
//! Before all that, the micro-benchmarks of the hot pure paths run
//! (`cargo bench`: Job sanitising, status copy, DesiredSet diff); `--micro`
//! runs only those.
//!
//! The table goes to standard output and, as JSON, to `target/bench/`.

mod backlog;
mod chart;
mod histogram;
mod load;
mod measure;
mod multikueue_setup;
mod replicas;
mod resync;
mod status;
mod table;
mod vs_multikueue;

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use jobrelay_e2e::binaries::Profile;
use jobrelay_e2e::cluster::ClusterSet;
use jobrelay_e2e::controlplane;
use jobrelay_e2e::fixtures::TestJob;
use jobrelay_e2e::kit;
use jobrelay_e2e::relay::{Options, Relay};
use jobrelay_e2e::supervisor::Supervisor;
use jobrelay_proto::wire::MANAGED_BY;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde::Serialize;

use crate::{log, supervisor_command, workspace_root};
use measure::{CpuSample, Figures, Point, Timestamps, at_once, load_average, rate, wait_all};

#[derive(clap::Args)]
pub struct Args {
    /// Jobs per run; repeat for several sizes.
    #[arg(long = "jobs", default_values_t = [1000])]
    jobs: Vec<usize>,
    /// Also run with 10,000 Jobs (takes a long time on 2 cores).
    #[arg(long)]
    with_10k: bool,
    /// Run only the micro-benchmarks of the hot pure paths (no clusters).
    #[arg(long, conflicts_with_all = ["jobs", "with_10k"])]
    micro: bool,
    /// Compare with Kueue's MultiKueue instead: raw, jobrelay standalone,
    /// jobrelay behind Kueue and MultiKueue, on the same clusters and Jobs.
    #[arg(long, conflicts_with_all = ["with_10k", "micro"])]
    vs_multikueue: bool,
}

/// Everything measured for one N.
#[derive(Debug, Serialize)]
struct Report {
    jobs: usize,
    load_before: String,
    load_after: String,
    wall_seconds: f64,
    raw_create_worker_jobs_per_second: f64,
    /// Jobs created straight on a worker until their Pods run.
    raw_run_worker: Figures,
    /// Manager Jobs created until their mirrors' Pods run.
    dispatch_running: Figures,
    raw_create_manager_jobs_per_second: f64,
    dispatch: Figures,
    dispatch_ratio_to_raw_worker: f64,
    status: Figures,
    /// By the manager's own account, for the status step: worker finished →
    /// the manager heard it from the agent, and → the manager wrote it; and
    /// the write request alone.
    status_heard: histogram::Bounds,
    status_write: histogram::Bounds,
    status_written: histogram::Bounds,
    /// N short Jobs created at once straight on a worker → each finished.
    burst_raw: Figures,
    /// The status step's N short manager Jobs: created → shown finished.
    burst: Figures,
    /// How long the burst took through jobrelay, over the raw burst's time.
    burst_time_ratio_to_raw: f64,
    /// Manager Jobs offered at `offered_per_second` → mirror exists.
    offered: Figures,
    offered_per_second: f64,
    cleanup: Figures,
    /// By the manager's own account, for the cleanup step: DeleteMirror sent
    /// → the agent confirmed the mirror and every Pod gone.
    cleanup_confirmed: histogram::Bounds,
    cleanup_direct: Figures,
    cleanup_ratio_to_direct: f64,
    resync_seconds: f64,
    resync_mirrors: usize,
    /// The leader killed → the first Job dispatched by its successor.
    takeover_seconds: f64,
    /// Before the backlog step.
    peak_rss_mib: HashMap<String, u64>,
    /// After it: the manager has cached thousands more Jobs.
    peak_rss_mib_with_backlog: HashMap<String, u64>,
    /// CPU seconds per program during each step: where the time went.
    cpu_seconds: BTreeMap<String, BTreeMap<String, f64>>,
    /// Times manager or agents logged that requests waited for their
    /// client-side rate limit (`--kube-api-qps`).
    client_rate_limit_reached: usize,
    /// Manager reconciles that failed (each is retried) since the bench began.
    failed_reconciles: usize,
    /// Dispatch while a retention backlog is worked off.
    beside_backlog: backlog::Backlog,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    if args.vs_multikueue {
        return vs_multikueue::run(&args.jobs).await;
    }
    // The pure paths first: quick, and undisturbed by running clusters.
    crate::test::cargo(
        &[
            "bench",
            "-p",
            "jobrelay-manager",
            "-p",
            "jobrelay-agent",
            "--bench",
            "*",
        ],
        &[],
    )?;
    if args.micro {
        return Ok(());
    }
    let (supervisor, set) = start_clusters("bench")?;
    let options = Options {
        manager_config: Some(backlog::MANAGER_CONFIG.into()),
        manager_replicas: 2,
        ..release_options()
    };
    let relay = Relay::start_with(&set, options).await?;
    let mut sizes = args.jobs.clone();
    if args.with_10k {
        sizes.push(10_000);
    }
    let out = workspace_root().join("target").join("bench");
    std::fs::create_dir_all(&out)?;
    for n in sizes {
        let report = bench(&set, &relay, n).await?;
        table::print_table(&report);
        let path = out.join(format!("bench-{n}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
        log(&format!("wrote {}", path.display()));
    }
    drop(relay);
    supervisor.stop()
}

/// A manager and two workers, in a state folder named for `what` and this
/// process; the control plane is built first if it is not cached.
pub(crate) fn start_clusters(what: &str) -> anyhow::Result<(Supervisor, ClusterSet)> {
    controlplane::ensure_built(&mut log)?;
    let state_dir = workspace_root()
        .join("target")
        .join("jobrelay")
        .join(format!("{what}-{}", std::process::id()));
    let supervisor = Supervisor::start(supervisor_command()?, &state_dir, 2, false)?;
    let set = supervisor.set().clone();
    Ok((supervisor, set))
}

/// Optimised binaries logging what an operator would see, as in production.
pub(crate) fn release_options() -> Options {
    Options {
        profile: Profile::Release,
        log_filter: Some("info,kube=warn".into()),
        ..Options::default()
    }
}

async fn bench(set: &ClusterSet, relay: &Relay, n: usize) -> anyhow::Result<Report> {
    let started = Instant::now();
    let load_before = load_average();
    let ns = format!("bench-{n}");
    let raw_ns = format!("bench-raw-{n}");
    for cluster in &set.clusters {
        let client = cluster.client().await?;
        kit::create_namespace(&client, &ns).await;
        kit::create_namespace(&client, &raw_ns).await;
    }
    let manager = set.manager().client().await?;
    let worker = set.workers()[0].client().await?;
    let names: Vec<String> = (0..n).map(|i| format!("job-{i}")).collect();
    let mut cpu_seconds = BTreeMap::new();
    let cluster_names: Vec<String> = set.clusters.iter().map(|c| c.name.clone()).collect();
    let cpu = || CpuSample::take(&set.state_dir, &cluster_names);

    // Raw limit on the manager: Jobs no controller acts on.
    let raw_manager: Api<Job> = Api::namespaced(manager.clone(), &raw_ns);
    let (raw_manager_rate, _) = create_rate(&raw_manager, &names, |name| {
        TestJob::new(&raw_ns, name)
            .managed_by("bench.jobrelay.dev/nobody")
            .build()
    })
    .await?;
    delete_all(&raw_manager, &names).await?;

    // Raw limit on a worker, and the direct cleanup that jobrelay's is
    // compared with: the same Jobs a mirror is, Pods running, deleted with
    // Background propagation, done when Job and Pod are gone.
    let raw_worker: Api<Job> = Api::namespaced(worker.clone(), &raw_ns);
    let raw_pods: Api<Pod> = Api::namespaced(worker.clone(), &raw_ns);
    let running: Timestamps = Default::default();
    let watch = record_pods(raw_pods.clone(), PodPoint::Running, running.clone())
        .listed()
        .await?;
    let before = cpu();
    let (raw_worker_rate, raw_created) = create_rate(&raw_worker, &names, |name| {
        TestJob::new(&raw_ns, name).run_for("1h").build()
    })
    .await?;
    cpu_seconds.insert("raw create on a worker".into(), cpu().since(&before));
    let running = wait_all("raw Pods running", &names, &running).await?;
    let raw_run = Figures::between(&names, &raw_created, &running);
    watch.stop();
    let job_gone: Timestamps = Default::default();
    let pod_gone: Timestamps = Default::default();
    let watches = [
        measure::record(raw_worker.clone(), Point::Gone, job_gone.clone())
            .listed()
            .await?,
        record_pods(raw_pods.clone(), PodPoint::Gone, pod_gone.clone())
            .listed()
            .await?,
    ];
    let before = cpu();
    let deleted = delete_all(&raw_worker, &names).await?;
    let job_gone = wait_all("raw Jobs gone", &names, &job_gone).await?;
    let pod_gone = wait_all("raw Pods gone", &names, &pod_gone).await?;
    cpu_seconds.insert("cleanup direct".into(), cpu().since(&before));
    let done: HashMap<String, Instant> = names
        .iter()
        .filter_map(|n| Some((n.clone(), *job_gone.get(n)?.max(pod_gone.get(n)?))))
        .collect();
    let cleanup_direct = Figures::between(&names, &deleted, &done);
    watches.iter().for_each(|w| w.stop());
    let burst_raw = load::raw_burst(&raw_worker, &raw_ns, &suffixed(&names, "b")).await?;

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
    let before = cpu();
    let created = at_once(&names, create_relayed(&jobs, "1h")).await?;
    let mirrored = wait_all("every mirror on its worker", &names, &mirrored).await?;
    let dispatch = Figures::between(&names, &created, &mirrored);
    cpu_seconds.insert("dispatch".into(), cpu().since(&before));
    let mirror_running = wait_all("every mirror's Pod running", &names, &mirror_running).await?;
    let dispatch_running = Figures::between(&names, &created, &mirror_running);

    let resynced_worker = set.workers()[0].name.clone();
    let (resync, resync_mirrors) = resync::resync(relay, &resynced_worker).await?;

    log(&format!("deleting {n} manager Jobs"));
    let before = cpu();
    let metrics_before = relay.metrics().await?;
    let deleted = delete_all(&jobs, &names).await?;
    let released = wait_all("every manager Job released and gone", &names, &released).await?;
    let cleanup = Figures::between(&names, &deleted, &released);
    let cleanup_confirmed = status::manager_account(
        &metrics_before,
        &relay.metrics().await?,
        "jobrelay_cleanup_seconds",
    );
    cpu_seconds.insert("cleanup".into(), cpu().since(&before));
    watches.iter().for_each(|w| w.stop());

    let (status, burst, account) = status::status(set, relay, &jobs, &names).await?;
    let offered_per_second = raw_run.jobs_per_second * load::OFFERED_SHARE;
    let offered = load::offered(set, &jobs, &suffixed(&names, "o"), offered_per_second).await?;
    let peak_rss_mib = replicas::peak_rss(set, relay).await?;
    let beside_backlog = backlog::dispatch_beside(set, relay, n).await?;
    let peak_rss_mib_with_backlog = replicas::peak_rss(set, relay).await?;
    let takeover = replicas::takeover(set, relay, n).await?;
    Ok(Report {
        jobs: n,
        load_before,
        load_after: load_average(),
        wall_seconds: started.elapsed().as_secs_f64(),
        raw_create_worker_jobs_per_second: raw_worker_rate,
        raw_run_worker: raw_run,
        dispatch_running,
        raw_create_manager_jobs_per_second: raw_manager_rate,
        dispatch_ratio_to_raw_worker: dispatch.jobs_per_second
            / raw_worker_rate.max(f64::MIN_POSITIVE),
        dispatch,
        status,
        status_heard: account.heard,
        status_write: account.write,
        status_written: account.written,
        burst_time_ratio_to_raw: burst.seconds / burst_raw.seconds.max(f64::MIN_POSITIVE),
        burst_raw,
        burst,
        offered,
        offered_per_second,
        cleanup_ratio_to_direct: cleanup.jobs_per_second
            / cleanup_direct.jobs_per_second.max(f64::MIN_POSITIVE),
        cleanup,
        cleanup_confirmed,
        cleanup_direct,
        resync_seconds: resync.as_secs_f64(),
        resync_mirrors,
        takeover_seconds: takeover.as_secs_f64(),
        peak_rss_mib,
        peak_rss_mib_with_backlog,
        cpu_seconds,
        client_rate_limit_reached: logged(relay, set, "kube client rate limit reached"),
        failed_reconciles: logged(relay, set, "reconcile failed"),
        beside_backlog,
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

/// `names`, each with `-suffix`: the Jobs of another step.
fn suffixed(names: &[String], suffix: &str) -> Vec<String> {
    names.iter().map(|n| format!("{n}-{suffix}")).collect()
}

/// A call (for [`at_once`] or [`measure::paced`]) that creates the named
/// manager Job in `jobs`' namespace, relayed, its Pod running `run_for`.
pub(crate) fn create_relayed(
    jobs: &Api<Job>,
    run_for: &str,
) -> impl Fn(String) -> futures::future::BoxFuture<'static, Result<(), kube::Error>> {
    let (jobs, run_for) = (jobs.clone(), run_for.to_string());
    let ns = jobs.namespace().unwrap_or_default().to_string();
    move |name| {
        let (jobs, job) = (jobs.clone(), relayed(&ns, &name, &run_for));
        Box::pin(async move { jobs.create(&PostParams::default(), &job).await.map(|_| ()) })
    }
}

/// A manager Job that jobrelay relays, its Pod running `run_for`.
pub(crate) fn relayed(ns: &str, name: &str, run_for: &str) -> Job {
    TestJob::new(ns, name)
        .managed_by(MANAGED_BY)
        .run_for(run_for)
        .build()
}

/// Creates a Job per name at once; returns Jobs per second, and when each
/// create was issued.
async fn create_rate(
    api: &Api<Job>,
    names: &[String],
    job: impl Fn(&str) -> Job,
) -> anyhow::Result<(f64, HashMap<String, Instant>)> {
    let started = Instant::now();
    let issued = at_once(names, |name| {
        let (api, job) = (api.clone(), job(&name));
        async move { api.create(&PostParams::default(), &job).await.map(|_| ()) }
    })
    .await?;
    let rate = rate(names.len(), started.elapsed());
    log(&format!("{} Jobs created at {rate:.0}/s", names.len()));
    Ok((rate, issued))
}

/// Deletes every named Job at once with Background propagation (one gone
/// already, e.g. by retention, counts as deleted); returns when each delete
/// was issued.
pub(crate) async fn delete_all(
    api: &Api<Job>,
    names: &[String],
) -> anyhow::Result<HashMap<String, Instant>> {
    at_once(names, |name| {
        let api = api.clone();
        async move {
            match api.delete(&name, &DeleteParams::background()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e),
            }
        }
    })
    .await
}

/// What a Pod watch notes.
#[derive(Clone, Copy)]
pub(crate) enum PodPoint {
    Running,
    Gone,
}

/// Notes when the Pod of each Job (by its `job-name` label) first ran, or
/// was gone.
pub(crate) fn record_pods(pods: Api<Pod>, point: PodPoint, seen: Timestamps) -> measure::Recording {
    use kube::runtime::watcher::Event;
    measure::recording(pods, move |event, now| {
        let pod = match (point, event) {
            (PodPoint::Gone, Event::Delete(pod)) => pod,
            (PodPoint::Running, Event::Apply(pod) | Event::InitApply(pod))
                if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") =>
            {
                pod
            }
            _ => return,
        };
        if let Some(job) = pod.metadata.labels.as_ref().and_then(|l| l.get("job-name")) {
            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.entry(job.clone()).or_insert(now);
        }
    })
}
