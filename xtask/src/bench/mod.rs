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
mod vs_multikueue;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use jobrelay_e2e::cluster::ClusterSet;
use jobrelay_e2e::controlplane::{self, seconds};
use jobrelay_e2e::fixtures::TestJob;
use jobrelay_e2e::kit;
use jobrelay_e2e::relay::{Options, Profile, Relay};
use jobrelay_e2e::supervisor::Supervisor;
use jobrelay_e2e::wait::{self, Seen};
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
    /// the manager heard it from the agent, and → the manager wrote it.
    status_heard: histogram::Bounds,
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
        print_table(&report);
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
    let created = at_once(&names, |name| {
        let (jobs, job) = (jobs.clone(), relayed(&ns, &name, "1h"));
        async move { jobs.create(&PostParams::default(), &job).await.map(|_| ()) }
    })
    .await?;
    let mirrored = wait_all("every mirror on its worker", &names, &mirrored).await?;
    let dispatch = Figures::between(&names, &created, &mirrored);
    cpu_seconds.insert("dispatch".into(), cpu().since(&before));
    let mirror_running = wait_all("every mirror's Pod running", &names, &mirror_running).await?;
    let dispatch_running = Figures::between(&names, &created, &mirror_running);

    let resynced_worker = set.workers()[0].name.clone();
    let (resync, resync_mirrors) = resync(relay, &resynced_worker).await?;

    log(&format!("deleting {n} manager Jobs"));
    let before = cpu();
    let metrics_before = relay.metrics().await?;
    let deleted = delete_all(&jobs, &names).await?;
    let released = wait_all("every manager Job released and gone", &names, &released).await?;
    let cleanup = Figures::between(&names, &deleted, &released);
    let cleanup_confirmed = manager_account(
        &metrics_before,
        &relay.metrics().await?,
        "jobrelay_cleanup_seconds",
    );
    cpu_seconds.insert("cleanup".into(), cpu().since(&before));
    watches.iter().for_each(|w| w.stop());

    let (status, burst, status_heard, status_written) =
        status(set, relay, &jobs, &ns, &names).await?;
    let offered_per_second = raw_run.jobs_per_second * load::OFFERED_SHARE;
    let offered =
        load::offered(set, &jobs, &ns, &suffixed(&names, "o"), offered_per_second).await?;
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
        status_heard,
        status_written,
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

/// Restarts the agent of `worker` while it holds its mirrors; returns how
/// long until it had its DesiredSet again, and how many mirrors it held.
async fn resync(relay: &Relay, worker: &str) -> anyhow::Result<(Duration, usize)> {
    let marker = "desired set received";
    let before = relay.agent_log(worker).matches(marker).count();
    relay.kill_agent(worker);
    let started = Instant::now();
    relay.start_agent(worker)?;
    wait::try_until(
        format!("agent {worker} resynced"),
        Duration::from_secs(600),
        || {
            let seen = relay.agent_log(worker).matches(marker).count();
            async move {
                if seen > before {
                    Seen::Ready(())
                } else {
                    Seen::Waiting("no DesiredSet yet".into())
                }
            }
        },
    )
    .await?;
    let took = started.elapsed();
    let log = relay.agent_log(worker);
    let held = log
        .lines()
        .rev()
        .find(|l| l.contains("session open"))
        .and_then(|l| l.split("inventory=").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    crate::log(&format!(
        "agent {worker} resynced {held} mirrors in {}",
        seconds(took)
    ));
    Ok((took, held))
}

/// N short Jobs: from a worker Job finished to its manager Job showing it,
/// and from created to shown finished (the burst); with the manager's
/// account of when it heard each and when it wrote it.
async fn status(
    set: &ClusterSet,
    relay: &Relay,
    jobs: &Api<Job>,
    ns: &str,
    names: &[String],
) -> anyhow::Result<(Figures, Figures, histogram::Bounds, histogram::Bounds)> {
    const HEARD: &str = "jobrelay_status_heard_seconds";
    const WRITTEN: &str = "jobrelay_status_seconds";
    let metrics_before = relay.metrics().await?;
    let names = suffixed(names, "s");
    let on_worker: Timestamps = Default::default();
    let on_manager: Timestamps = Default::default();
    let watches = measure::record_relayed(
        set,
        jobs,
        (Point::Finished, &on_manager),
        (Point::Finished, &on_worker),
    )
    .await?;
    log(&format!("creating {} short manager Jobs", names.len()));
    let created = at_once(&names, |name| {
        let (jobs, job) = (jobs.clone(), relayed(ns, &name, load::SHORT));
        async move { jobs.create(&PostParams::default(), &job).await.map(|_| ()) }
    })
    .await?;
    let on_worker = wait_all("every worker Job finished", &names, &on_worker).await?;
    let on_manager = wait_all("every manager Job shows it", &names, &on_manager).await?;
    let metrics_after = relay.metrics().await?;
    watches.iter().for_each(|w| w.stop());
    delete_all(jobs, &names).await?;
    let account = |name| manager_account(&metrics_before, &metrics_after, name);
    Ok((
        Figures::between(&names, &on_worker, &on_manager),
        Figures::between(&names, &created, &on_manager),
        account(HEARD),
        account(WRITTEN),
    ))
}

/// What the manager's histogram `name` counted between two readings of its
/// metrics.
fn manager_account(before: &str, after: &str, name: &str) -> histogram::Bounds {
    histogram::between(
        &histogram::buckets(before, name),
        &histogram::buckets(after, name),
    )
}

fn print_table(r: &Report) {
    println!();
    println!(
        "jobrelay bench — {} Jobs, 2 manager replicas + 2 workers, load {} → {}, {:.0} s",
        r.jobs, r.load_before, r.load_after, r.wall_seconds
    );
    println!(
        "{:<44} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "measure", "Jobs/s", "p50 ms", "p95 ms", "p99 ms", "max ms"
    );
    let row = |what: &str, f: &Figures| {
        println!(
            "{what:<44} {:>9.1} {:>8} {:>8} {:>8} {:>8}",
            f.jobs_per_second, f.p50_ms, f.p95_ms, f.p99_ms, f.max_ms
        );
    };
    println!(
        "{:<44} {:>9.1}",
        "raw create, one worker API server", r.raw_create_worker_jobs_per_second
    );
    println!(
        "{:<44} {:>9.1}",
        "raw create, manager API server", r.raw_create_manager_jobs_per_second
    );
    row(
        "raw run: worker Job created -> Pod running",
        &r.raw_run_worker,
    );
    row("dispatch: manager Job -> mirror exists", &r.dispatch);
    row(
        "dispatch: manager Job -> mirror's Pod running",
        &r.dispatch_running,
    );
    println!(
        "{:<44} {:>9.2}",
        "  ratio to raw worker create", r.dispatch_ratio_to_raw_worker
    );
    row(
        &format!(
            "dispatch beside {} expired Jobs (left {})",
            r.beside_backlog.expired_at_start, r.beside_backlog.expired_left_after
        ),
        &r.beside_backlog.dispatch,
    );
    row("status: worker finished -> manager shows", &r.status);
    let account = |what: &str, bounds: &histogram::Bounds| {
        println!(
            "{:<44} {:>9} p50 <= {:.2} s, p95 <= {:.2} s, p99 <= {:.2} s",
            format!("  by the manager's account: {what}"),
            bounds.count,
            bounds.p50_at_most_s,
            bounds.p95_at_most_s,
            bounds.p99_at_most_s
        );
    };
    account("heard", &r.status_heard);
    account("wrote", &r.status_written);
    row("burst raw: N short Jobs on a worker -> done", &r.burst_raw);
    row("burst: N short manager Jobs -> shown done", &r.burst);
    println!(
        "{:<44} {:>9.2}",
        "  time ratio to the raw burst", r.burst_time_ratio_to_raw
    );
    row(
        &format!(
            "offered {:.1}/s: manager Job -> mirror",
            r.offered_per_second
        ),
        &r.offered,
    );
    row("cleanup: delete manager Job -> released", &r.cleanup);
    account("sent -> gone", &r.cleanup_confirmed);
    row(
        "cleanup direct: Background delete, Pod gone",
        &r.cleanup_direct,
    );
    println!(
        "{:<44} {:>9.2}",
        "  ratio to direct cleanup", r.cleanup_ratio_to_direct
    );
    println!(
        "{:<44} {:>9.1} s ({} mirrors)",
        "resync: agent restarted -> DesiredSet", r.resync_seconds, r.resync_mirrors
    );
    println!(
        "{:<44} {:>9.1} s",
        "takeover: leader killed -> Job dispatched", r.takeover_seconds
    );
    let mut rss: Vec<_> = r.peak_rss_mib.iter().collect();
    rss.sort();
    for (name, mib) in rss {
        println!("{:<44} {:>9} MiB", format!("peak RSS {name}"), mib);
    }
    let manager = r
        .peak_rss_mib_with_backlog
        .get("manager")
        .copied()
        .unwrap_or(0);
    println!(
        "{:<44} {:>9} MiB",
        "peak RSS manager, after the backlog step", manager
    );
    println!(
        "{:<44} {:>9}",
        "client rate limit reached so far (log lines)", r.client_rate_limit_reached
    );
    println!(
        "{:<44} {:>9}",
        "manager reconciles failed so far (retried)", r.failed_reconciles
    );
    for (step, used) in &r.cpu_seconds {
        let mut used: Vec<_> = used.iter().filter(|(_, s)| **s >= 0.05).collect();
        used.sort_by(|a, b| b.1.total_cmp(a.1));
        let each: Vec<String> = used
            .iter()
            .map(|(program, s)| {
                let per_job = **s * 1000.0 / r.jobs as f64;
                format!("{program} {s:.1} s ({per_job:.1} ms/Job)")
            })
            .collect();
        println!("CPU during {step}: {}", each.join(", "));
    }
}
