//! `cargo xtask bench`: jobrelay measured on the local clusters (1 manager +
//! 2 workers). N manager Jobs are created at once; the time until each mirror
//! exists on its worker is taken from watches on the workers. Then all are
//! deleted at once; the time until each manager Job is gone — which jobrelay
//! allows only after the agent reported its mirror and every Pod gone — is
//! taken from a watch on the manager. Peak resident memory comes from /proc.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use jobrelay_e2e::controlplane::{self, seconds};
use jobrelay_e2e::fixtures::TestJob;
use jobrelay_e2e::kit;
use jobrelay_e2e::relay::Relay;
use jobrelay_e2e::supervisor::Supervisor;
use jobrelay_e2e::wait::{self, Seen};
use jobrelay_proto::wire::MANAGED_BY;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

use crate::{log, supervisor_command, workspace_root};

const NAMESPACE: &str = "bench";
/// Requests in flight at once when creating or deleting.
const CONCURRENCY: usize = 32;

#[derive(clap::Args)]
pub struct Args {
    /// Manager Jobs per run.
    #[arg(long, default_value_t = 200)]
    jobs: usize,
}

/// When each Job (by name) was seen.
type Timestamps = Arc<Mutex<HashMap<String, Instant>>>;

pub async fn run(args: Args) -> anyhow::Result<()> {
    controlplane::ensure_built(&mut log)?;
    let state_dir = workspace_root()
        .join("target")
        .join("jobrelay")
        .join(format!("bench-{}", std::process::id()));
    let supervisor = Supervisor::start(supervisor_command()?, &state_dir, 2, false)?;
    let set = supervisor.set().clone();
    let relay = Relay::start(&set).await?;
    for cluster in &set.clusters {
        kit::create_namespace(&cluster.client().await?, NAMESPACE).await;
    }
    let jobs: Api<Job> = Api::namespaced(set.manager().client().await?, NAMESPACE);

    let mirrored: Timestamps = Arc::default();
    for worker in set.workers() {
        let api: Api<Job> = Api::namespaced(worker.client().await?, NAMESPACE);
        tokio::spawn(record(api, Arc::clone(&mirrored), false));
    }
    let gone: Timestamps = Arc::default();
    tokio::spawn(record(jobs.clone(), Arc::clone(&gone), true));

    log(&format!("creating {} manager Jobs", args.jobs));
    let names: Vec<String> = (0..args.jobs).map(|i| format!("bench-{i}")).collect();
    let created = at_once(&names, |name| {
        let jobs = jobs.clone();
        async move {
            let job = TestJob::new(NAMESPACE, &name)
                .managed_by(MANAGED_BY)
                .run_for("1h")
                .build();
            jobs.create(&PostParams::default(), &job).await.map(|_| ())
        }
    })
    .await?;
    let dispatch = wait_all("every mirror on its worker", &names, &mirrored).await?;

    log(&format!("deleting {} manager Jobs", args.jobs));
    let deleted = at_once(&names, |name| {
        let jobs = jobs.clone();
        async move {
            jobs.delete(&name, &DeleteParams::default())
                .await
                .map(|_| ())
        }
    })
    .await?;
    let cleanup = wait_all("every manager Job released and gone", &names, &gone).await?;

    let memory: Vec<(String, u64)> = [
        "jobrelay-manager",
        "jobrelay-agent worker-1",
        "jobrelay-agent worker-2",
    ]
    .iter()
    .zip(relay.pids())
    .map(|(name, pid)| (name.to_string(), peak_rss_kib(pid)))
    .collect();

    let create_to_mirror = latencies(&names, &created, &dispatch);
    let delete_to_gone = latencies(&names, &deleted, &cleanup);
    println!();
    println!("jobrelay bench — {} Jobs over 2 workers", args.jobs);
    println!("{:<36} {:>9} {:>9} {:>9}", "measure", "p50", "p99", "max");
    for (what, values) in [
        ("create manager Job -> mirror exists", &create_to_mirror),
        ("delete manager Job -> released, gone", &delete_to_gone),
    ] {
        println!(
            "{what:<36} {:>9} {:>9} {:>9}",
            ms(percentile(values, 50)),
            ms(percentile(values, 99)),
            ms(percentile(values, 100))
        );
    }
    for (name, kib) in &memory {
        println!(
            "{:<36} {:>9}",
            format!("peak RSS {name}"),
            format!("{} MiB", kib / 1024)
        );
    }
    drop(relay);
    supervisor.stop()
}

/// Records when each Job is first seen (or, with `deletions`, when it is gone).
async fn record(api: Api<Job>, seen: Timestamps, deletions: bool) {
    let events = watcher(api, watcher::Config::default()).default_backoff();
    let _ = events
        .try_for_each(|event| {
            let now = Instant::now();
            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            match event {
                watcher::Event::Apply(job) | watcher::Event::InitApply(job) if !deletions => {
                    seen.entry(job.name_any()).or_insert(now);
                }
                watcher::Event::Delete(job) if deletions => {
                    seen.entry(job.name_any()).or_insert(now);
                }
                _ => {}
            }
            futures::future::ready(Ok(()))
        })
        .await;
}

/// Runs `call` for every name, `CONCURRENCY` at a time; returns when each was issued.
async fn at_once<F, Fut>(names: &[String], call: F) -> anyhow::Result<HashMap<String, Instant>>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let issued = futures::stream::iter(names.iter().cloned())
        .map(|name| {
            let started = Instant::now();
            let call = call(name.clone());
            async move { call.await.map(|()| (name, started)) }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<HashMap<_, _>>()
        .await?;
    Ok(issued)
}

async fn wait_all(
    what: &str,
    names: &[String],
    seen: &Timestamps,
) -> anyhow::Result<HashMap<String, Instant>> {
    let timeout = Duration::from_secs(60 + names.len() as u64 / 5);
    let started = Instant::now();
    let result = wait::try_until(what, timeout, || {
        let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let missing = names.iter().filter(|n| !seen.contains_key(*n)).count();
        async move {
            if missing == 0 {
                Seen::Ready(seen)
            } else {
                Seen::Waiting(format!("{missing} missing"))
            }
        }
    })
    .await?;
    log(&format!("{what} after {}", seconds(started.elapsed())));
    Ok(result)
}

fn latencies(
    names: &[String],
    from: &HashMap<String, Instant>,
    to: &HashMap<String, Instant>,
) -> Vec<Duration> {
    let mut values: Vec<Duration> = names
        .iter()
        .filter_map(|n| Some(to.get(n)?.saturating_duration_since(*from.get(n)?)))
        .collect();
    values.sort();
    values
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() * p).div_ceil(100)).clamp(1, sorted.len()) - 1;
    sorted[index]
}

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// Peak resident set size (VmHWM) of a process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
