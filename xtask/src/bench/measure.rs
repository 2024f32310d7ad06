//! The measuring instruments of the bench: watches that note when each Job
//! reached a point, a tight concurrent client, and latency statistics.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use jobrelay_e2e::controlplane::seconds;
use jobrelay_e2e::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde::Serialize;

use crate::log;

/// Requests in flight at once when creating or deleting.
pub const CONCURRENCY: usize = 32;

/// When each object (by key) reached the point a [`record`] watches for.
pub type Timestamps = Arc<Mutex<HashMap<String, Instant>>>;

/// What a watch notes about an object.
#[derive(Clone, Copy)]
pub enum Point {
    /// First seen.
    Seen,
    /// First seen with a `Complete` or `Failed` condition.
    Finished,
    /// Deleted.
    Gone,
}

/// A running watch and whether it has listed everything once.
pub struct Recording {
    task: tokio::task::JoinHandle<()>,
    listed: tokio::sync::watch::Receiver<bool>,
}

impl Recording {
    /// Waits until the watch has listed everything once, so that nothing
    /// done from now on can slip past it.
    pub async fn listed(mut self) -> anyhow::Result<Self> {
        self.listed.wait_for(|listed| *listed).await?;
        Ok(self)
    }

    pub fn stop(&self) {
        self.task.abort();
    }
}

/// Runs a watch on `api`, handing every event with the time it arrived to
/// `note`, until stopped.
pub fn recording<K>(
    api: Api<K>,
    mut note: impl FnMut(watcher::Event<K>, Instant) + Send + 'static,
) -> Recording
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    let (listed_tx, listed) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(async move {
        let events = watcher(api, watcher::Config::default()).default_backoff();
        let _ = events
            .try_for_each(|event| {
                let now = Instant::now();
                if let watcher::Event::InitDone = event {
                    listed_tx.send_replace(true);
                }
                note(event, now);
                futures::future::ready(Ok(()))
            })
            .await;
    });
    Recording { task, listed }
}

/// Notes, for every Job of `api`, when it reached `point`, until stopped.
pub fn record(api: Api<Job>, point: Point, seen: Timestamps) -> Recording {
    recording(api, move |event, now| {
        let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        match (point, event) {
            (Point::Seen, watcher::Event::Apply(job) | watcher::Event::InitApply(job)) => {
                seen.entry(job.name_any()).or_insert(now);
            }
            (Point::Finished, watcher::Event::Apply(job) | watcher::Event::InitApply(job))
                if finished(&job) =>
            {
                seen.entry(job.name_any()).or_insert(now);
            }
            (Point::Gone, watcher::Event::Delete(job)) => {
                seen.entry(job.name_any()).or_insert(now);
            }
            _ => {}
        }
    })
}

/// Records `manager_point` of the manager Jobs in `jobs` and `worker_point`
/// of the Jobs in the same namespace on every worker, listed already.
pub async fn record_relayed(
    set: &jobrelay_e2e::cluster::ClusterSet,
    jobs: &Api<Job>,
    (manager_point, on_manager): (Point, &Timestamps),
    (worker_point, on_workers): (Point, &Timestamps),
) -> anyhow::Result<Vec<Recording>> {
    let ns = jobs.namespace().unwrap_or_default();
    let mut watches = vec![
        record(jobs.clone(), manager_point, on_manager.clone())
            .listed()
            .await?,
    ];
    for w in set.workers() {
        let on_worker = Api::namespaced(w.client().await?, ns);
        watches.push(
            record(on_worker, worker_point, on_workers.clone())
                .listed()
                .await?,
        );
    }
    Ok(watches)
}

fn finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}

/// Runs `call` for every name, [`CONCURRENCY`] at a time; returns when each
/// call was issued.
pub async fn at_once<F, Fut>(names: &[String], call: F) -> anyhow::Result<HashMap<String, Instant>>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    issue(
        futures::stream::iter(names.iter().cloned()),
        CONCURRENCY,
        call,
    )
    .await
}

/// Runs `call` for every name, `per_second` of them a second whatever the
/// answers take (an offered load); returns when each call was issued.
pub async fn paced<F, Fut>(
    names: &[String],
    per_second: f64,
    call: F,
) -> anyhow::Result<HashMap<String, Instant>>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let every = Duration::from_secs_f64(1.0 / per_second.max(0.01));
    let start = tokio::time::Instant::now();
    let due = futures::stream::iter(names.iter().cloned().zip(0u32..)).then(
        move |(name, i)| async move {
            tokio::time::sleep_until(start + every * i).await;
            name
        },
    );
    // Enough in flight that a slow answer never holds back the next call.
    issue(due, CONCURRENCY * 16, call).await
}

/// Runs `call` for each name as `names` yields it, at most `in_flight` at a
/// time; returns when each call was issued.
async fn issue<F, Fut>(
    names: impl futures::Stream<Item = String>,
    in_flight: usize,
    call: F,
) -> anyhow::Result<HashMap<String, Instant>>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let issued = names
        .map(|name| {
            let started = Instant::now();
            let call = call(name.clone());
            async move { call.await.map(|()| (name, started)) }
        })
        .buffer_unordered(in_flight)
        .try_collect::<HashMap<_, _>>()
        .await?;
    Ok(issued)
}

/// Waits until every name was noted in `seen`; returns the notes.
pub async fn wait_all(
    what: &str,
    names: &[String],
    seen: &Timestamps,
) -> anyhow::Result<HashMap<String, Instant>> {
    let timeout = Duration::from_secs(120 + names.len() as u64 / 4);
    wait_all_within(what, names, seen, timeout).await
}

/// [`wait_all`], giving up after `timeout`.
pub async fn wait_all_within(
    what: &str,
    names: &[String],
    seen: &Timestamps,
    timeout: Duration,
) -> anyhow::Result<HashMap<String, Instant>> {
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

/// Throughput and latency of one measure.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub jobs: usize,
    pub seconds: f64,
    pub jobs_per_second: f64,
    pub p50_ms: u128,
    pub p95_ms: u128,
    pub p99_ms: u128,
    pub max_ms: u128,
}

impl Figures {
    /// From per-name start and end times: throughput over the whole span
    /// (first start to last end) and the latency distribution.
    pub fn between(
        names: &[String],
        from: &HashMap<String, Instant>,
        to: &HashMap<String, Instant>,
    ) -> Figures {
        let mut latencies: Vec<Duration> = names
            .iter()
            .filter_map(|n| Some(to.get(n)?.saturating_duration_since(*from.get(n)?)))
            .collect();
        latencies.sort();
        let first = names.iter().filter_map(|n| from.get(n)).min();
        let last = names.iter().filter_map(|n| to.get(n)).max();
        let span = match (first, last) {
            (Some(first), Some(last)) => last.saturating_duration_since(*first),
            _ => Duration::ZERO,
        };
        Figures {
            jobs: latencies.len(),
            seconds: span.as_secs_f64(),
            jobs_per_second: rate(latencies.len(), span),
            p50_ms: percentile(&latencies, 50).as_millis(),
            p95_ms: percentile(&latencies, 95).as_millis(),
            p99_ms: percentile(&latencies, 99).as_millis(),
            max_ms: percentile(&latencies, 100).as_millis(),
        }
    }
}

pub fn rate(count: usize, span: Duration) -> f64 {
    if span.is_zero() {
        return 0.0;
    }
    count as f64 / span.as_secs_f64()
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() * p).div_ceil(100)).clamp(1, sorted.len()) - 1;
    sorted[index]
}

/// Peak resident set size (VmHWM) of a process, in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Clock ticks per second in `/proc/<pid>/stat` (USER_HZ, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU seconds each process of one bench had used at one moment, with its
/// program name and, if it serves one cluster, the cluster's; a process
/// belongs to the bench when its command line or environment names the
/// bench's state folder (every control-plane component and jobrelay process
/// does), and to a cluster when they name that cluster's folder in it. The
/// bench's own process is counted too, as "bench client": its watches and
/// requests share the same cores.
#[derive(Debug, Clone, Default)]
pub struct CpuSample(HashMap<u32, (String, f64)>);

impl CpuSample {
    pub fn take(state_dir: &Path, clusters: &[String]) -> CpuSample {
        let dir = state_dir.to_string_lossy().into_owned();
        let mut sample = HashMap::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse().ok()) else {
                continue;
            };
            let read = |file: &str| std::fs::read(entry.path().join(file)).unwrap_or_default();
            let cmdline = read("cmdline");
            let environ = read("environ");
            let text = [cmdline.as_slice(), &environ].map(String::from_utf8_lossy);
            let names = |folder: &str| text.iter().any(|t| t.contains(folder));
            let own = pid == std::process::id();
            if !names(&dir) && !own {
                continue;
            }
            let program = cmdline.split(|b| *b == 0).next().unwrap_or_default();
            let program = String::from_utf8_lossy(program);
            let mut program = program.rsplit('/').next().unwrap_or_default().to_string();
            if own {
                program = "bench client".into();
            } else if let Some(cluster) = clusters.iter().find(|c| names(&format!("{dir}/{c}/"))) {
                program = format!("{program} {cluster}");
            }
            let stat = String::from_utf8_lossy(&read("stat")).into_owned();
            if let Some(seconds) = cpu_seconds(&stat) {
                sample.insert(pid, (program, seconds));
            }
        }
        CpuSample(sample)
    }

    /// CPU seconds used between `before` and this sample, by program; a
    /// process that ended in between is not counted.
    pub fn since(&self, before: &CpuSample) -> BTreeMap<String, f64> {
        let mut used = BTreeMap::new();
        for (pid, (program, seconds)) in &self.0 {
            let earlier = before.0.get(pid).map_or(0.0, |(_, s)| *s);
            *used.entry(program.clone()).or_insert(0.0) += seconds - earlier;
        }
        used
    }
}

/// User plus system CPU seconds from the text of `/proc/<pid>/stat`.
fn cpu_seconds(stat: &str) -> Option<f64> {
    // The command name may hold spaces and parentheses; fields follow the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some((ticks(11)? + ticks(12)?) as f64 / TICKS_PER_SECOND)
}

/// What every report of the bench opens with: how many Jobs, the machine's
/// load averages before and after, and how long it took.
#[derive(Debug, Serialize)]
pub struct Run {
    pub jobs: usize,
    pub load_before: String,
    pub load_after: String,
    pub wall_seconds: f64,
}

/// A [`Run`] under way.
pub struct Running {
    jobs: usize,
    load_before: String,
    started: Instant,
}

impl Run {
    pub fn start(jobs: usize) -> Running {
        Running {
            jobs,
            load_before: load_average(),
            started: Instant::now(),
        }
    }

    /// "`what` — N Jobs, `setup`, load … → …, … s", the first line of a table.
    pub fn headline(&self, what: &str, setup: &str) -> String {
        format!(
            "{what} — {} Jobs, {setup}, load {} → {}, {:.0} s",
            self.jobs, self.load_before, self.load_after, self.wall_seconds
        )
    }
}

impl Running {
    pub fn ended(self) -> Run {
        Run {
            jobs: self.jobs,
            load_before: self.load_before,
            load_after: load_average(),
            wall_seconds: self.started.elapsed().as_secs_f64(),
        }
    }
}

/// The machine's load averages (1, 5, 15 minutes).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_reports_its_size_load_and_time_as_top_level_fields() {
        #[derive(Serialize)]
        struct Report {
            #[serde(flatten)]
            run: Run,
            other: u8,
        }
        let run = Run::start(7).ended();
        assert_eq!(run.load_before.split(' ').count(), 3, "{run:?}");
        let json = serde_json::to_value(Report { run, other: 1 }).expect("serialises");
        let mut keys: Vec<&str> = json
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["jobs", "load_after", "load_before", "other", "wall_seconds"]
        );
        assert_eq!(json["jobs"], 7);
    }

    #[test]
    fn figures_take_throughput_over_the_whole_span_and_percentiles_per_job() {
        let t0 = Instant::now();
        let names: Vec<String> = (0..100).map(|i| format!("j{i}")).collect();
        let from: HashMap<String, Instant> = names.iter().map(|n| (n.clone(), t0)).collect();
        let to: HashMap<String, Instant> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), t0 + Duration::from_millis(10 * (i as u64 + 1))))
            .collect();
        let figures = Figures::between(&names, &from, &to);
        assert_eq!(figures.jobs, 100);
        assert_eq!(figures.p50_ms, 500);
        assert_eq!(figures.p99_ms, 990);
        assert_eq!(figures.max_ms, 1000);
        assert!((figures.jobs_per_second - 100.0).abs() < 0.01);
    }

    #[test]
    fn cpu_seconds_are_user_plus_system_time_after_the_command_name() {
        let stat =
            "4242 (kube (api) server) S 1 2 3 0 -1 4194304 99 0 0 0 250 50 0 0 20 0 1 0 2184499";
        assert_eq!(cpu_seconds(stat), Some(3.0));
        assert_eq!(cpu_seconds("4242 (x) S 1"), None);
    }
}
