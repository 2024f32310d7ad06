//! What the machine spent while the bench measured: each program's CPU and
//! each client's API requests, a process's peak memory, the load averages
//! and a run's wall time.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Instant;

use jobrelay_testbed::cluster::ClusterSet;
use serde::Serialize;

use super::requests::{Count, Mark};

/// Peak resident set size (VmHWM) of a process, in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:")
}

/// Resident set size now (VmRSS) of a process, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A `kB` field of `/proc/<pid>/status`; 0 if unreadable.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU seconds (user plus system) a process has used so far.
pub fn cpu_seconds_of(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    cpu_seconds(&stat).unwrap_or(0.0)
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

/// CPU seconds per program, and the requests each client made of each API
/// server, during each named step of one bench.
pub struct Spent {
    set: ClusterSet,
    jobs: usize,
    pub by_step: BTreeMap<String, BTreeMap<String, f64>>,
    pub requests_by_step: BTreeMap<String, Vec<Count>>,
    /// How long each step took, in seconds.
    pub spans: BTreeMap<String, f64>,
}

/// Where a step begins: each program's CPU, each audit log's length, and
/// the moment.
pub struct Sample {
    cpu: CpuSample,
    audit: Mark,
    at: Instant,
}

impl Spent {
    /// For the bench of the clusters `set`, `jobs` Jobs a step.
    pub fn new(set: &ClusterSet, jobs: usize) -> Spent {
        Spent {
            set: set.clone(),
            jobs,
            by_step: BTreeMap::new(),
            requests_by_step: BTreeMap::new(),
            spans: BTreeMap::new(),
        }
    }

    /// Where a step begins.
    pub fn sample(&self) -> Sample {
        let clusters: Vec<String> = self.set.clusters.iter().map(|c| c.name.clone()).collect();
        Sample {
            cpu: CpuSample::take(&self.set.state_dir, &clusters),
            audit: Mark::take(&self.set),
            at: Instant::now(),
        }
    }

    /// What was spent from `before` until now: CPU seconds by program, and
    /// requests per Job.
    pub fn since(&self, before: &Sample) -> (BTreeMap<String, f64>, Vec<Count>) {
        let cpu = self.sample().cpu.since(&before.cpu);
        (cpu, before.audit.since(self.jobs))
    }

    /// Records what was spent from `before` until now as `step`.
    pub fn record(&mut self, step: &str, before: &Sample) {
        let (cpu, requests) = self.since(before);
        self.by_step.insert(step.to_string(), cpu);
        self.requests_by_step.insert(step.to_string(), requests);
        let span = before.at.elapsed().as_secs_f64();
        self.spans.insert(step.to_string(), span);
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
    fn cpu_seconds_are_user_plus_system_time_after_the_command_name() {
        let stat =
            "4242 (kube (api) server) S 1 2 3 0 -1 4194304 99 0 0 0 250 50 0 0 20 0 1 0 2184499";
        assert_eq!(cpu_seconds(stat), Some(3.0));
        assert_eq!(cpu_seconds("4242 (x) S 1"), None);
    }
}
