//! `cargo xtask bench --vs-multikueue`: jobrelay beside Kueue's MultiKueue
//! (v0.19.2), on the same manager and worker clusters, with the same Jobs
//! (one Pod each, run by kwok), in one run:
//!
//! - raw: the Jobs created straight on a worker — the physical limit;
//! - Kueue alone: queued Jobs, a ClusterQueue with no admission check, run
//!   on the manager cluster's own node — Kueue's own pace, the anchor for
//!   the systems behind it;
//! - Kueue with a check answered at once: the same, behind an AdmissionCheck
//!   whose stand-in controller answers `Ready` as soon as quota is reserved
//!   ([`instant_check`]) — Kueue's pace with a check, apart from the
//!   check's controller;
//! - jobrelay standalone: relayed Jobs, no queue;
//! - jobrelay behind Kueue: queued Jobs, jobrelay's AdmissionCheck, the
//!   workers as they come (no Kueue of their own in the Jobs' way);
//! - jobrelay behind Kueue on both: the same, the workers opted in to
//!   worker-side Kueue (the mirror queued in the worker's Kueue too, as
//!   MultiKueue's remote Workloads are);
//! - MultiKueue: queued Jobs, the MultiKueue AdmissionCheck and
//!   MultiKueueConfig naming both workers, their kubeconfigs in Secrets,
//!   Kueue on each worker with the same queues.
//!
//! Each is measured on its own namespace: Jobs/s and the latency of created
//! → Pod running on a worker, worker Job finished → the manager Job shows
//! it, and deleted → Pods gone on the worker; then the Jobs and Pods left on
//! the workers (leaks); and the CPU each program spent from the first
//! created Job to the last Pod running. Quotas are large enough never to
//! limit.

mod instant_check;
mod report;
pub(crate) mod setup;
pub(crate) mod systems;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jobrelay_testbed::cluster::ClusterSet;
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::kueue_objects;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};

use crate::bench::shared::figures::{Figures, ratio};
use crate::bench::shared::jobs::{PodPoint, delete_all, left_after, record_pods, settled};
use crate::bench::shared::machine::{Run, Spent};
use crate::bench::shared::measure::Aborted;
use crate::bench::shared::measure::{self, Point, Timestamps, at_once, wait_all_within};
use crate::{log, workspace_root};
use report::{Measured, Report, draw, print_table};
use systems::System;

/// Each ClusterQueue's quota, in CPUs: never the limit.
const QUOTA_CPU: u32 = 100_000;
/// How long a Job of the first batch runs (it finishes, for the status step).
const SHORT_RUN: &str = "5s";
/// How long a step of `n` Jobs may take, or its Jobs to be gone once
/// deleted: MultiKueue v0.19.2 moves about one Job a second through its
/// worker clients.
fn patience(n: usize) -> Duration {
    Duration::from_secs(300 + 2 * n as u64)
}

/// How long leaks are waited out before they are counted.
const SETTLE: Duration = Duration::from_secs(90);

pub async fn run(sizes: &[usize]) -> anyhow::Result<()> {
    let clusters = setup::WithKueue::start("bench-vs").await?;
    let set = &clusters.set;
    instant_check::prepare(&set.manager().client().await?).await?;
    let out = workspace_root().join("target").join("bench");
    std::fs::create_dir_all(&out)?;
    for &n in sizes {
        let report = compare(set, n).await?;
        print_table(&report);
        let json = out.join(format!("vs-multikueue-{n}.json"));
        std::fs::write(&json, serde_json::to_string_pretty(&report)?)?;
        let svg = out.join(format!("vs-multikueue-{n}.svg"));
        draw(&svg, &report)?;
        log(&format!("wrote {} and {}", json.display(), svg.display()));
    }
    clusters.stop()
}

async fn compare(set: &ClusterSet, n: usize) -> anyhow::Result<Report> {
    let run = Run::start(n);
    let mut systems = Vec::new();
    for system in System::ALL {
        log(&format!("{}: {n} Jobs", system.name()));
        systems.push(measure_system(set, system, n).await?);
    }
    let pace = |system: System| {
        systems
            .iter()
            .find(|m: &&Measured| m.system == system.name())
            .map_or(0.0, |m| m.running.jobs_per_second)
    };
    let alone = pace(System::KueueAlone);
    Ok(Report {
        run: run.ended(),
        behind_kueue_ratio_to_kueue_alone: ratio(pace(System::JobrelayKueue), alone),
        both_kueues_ratio_to_kueue_alone: ratio(pace(System::JobrelayBothKueues), alone),
        systems,
    })
}

async fn measure_system(set: &ClusterSet, system: System, n: usize) -> anyhow::Result<Measured> {
    let ns = system.namespace(n);
    for cluster in &set.clusters {
        kit::create_namespace(&cluster.client().await?, &ns).await;
    }
    let manager = set.manager().client().await?;
    // The manager's queue (behind a check, or none for Kueue alone), and
    // the workers' own behind a check.
    let checks: Option<&[&str]> = match system {
        System::KueueAlone => Some(&[]),
        System::KueueCheck => Some(&[instant_check::CHECK]),
        System::JobrelayKueue | System::JobrelayBothKueues => Some(&["jobrelay"]),
        System::MultiKueue => Some(&["multikueue"]),
        System::Raw | System::Standalone => None,
    };
    if let Some(checks) = checks {
        let mut queued = vec![(manager.clone(), checks)];
        if matches!(system, System::JobrelayBothKueues | System::MultiKueue) {
            for worker in set.workers() {
                queued.push((worker.client().await?, &[]));
            }
        }
        for (client, checks) in queued {
            kueue_objects::queue_named(
                &client,
                &ns,
                &ns,
                kueue_objects::LOCAL_QUEUE,
                QUOTA_CPU,
                checks,
            )
            .await?;
        }
    }
    if matches!(system, System::JobrelayKueue | System::JobrelayBothKueues) {
        let both = system == System::JobrelayBothKueues;
        setup::worker_side_kueue(set, both).await?;
    }
    // Answers the stand-in check while the system is measured.
    let _answering =
        (system == System::KueueCheck).then(|| Aborted(instant_check::answer(&manager, &ns)));
    // Where the Jobs are created: the manager, or the first worker for raw.
    let entry = match system {
        System::Raw => set.workers()[0].client().await?,
        _ => manager,
    };
    let jobs: Api<Job> = Api::namespaced(entry, &ns);
    // Where their Pods run: the workers, or the manager's node for Kueue alone.
    let run_on = match system {
        System::KueueAlone | System::KueueCheck => std::slice::from_ref(set.manager()),
        _ => set.workers(),
    };
    let mut worker_jobs = Vec::new();
    let mut worker_pods = Vec::new();
    for worker in run_on {
        let client = worker.client().await?;
        worker_jobs.push(Api::<Job>::namespaced(client.clone(), &ns));
        worker_pods.push(Api::<Pod>::namespaced(client, &ns));
    }

    // First batch: short Jobs, from created to running, then finished.
    let names: Vec<String> = (0..n).map(|i| format!("short-{i}")).collect();
    let running: Timestamps = Default::default();
    let on_worker: Timestamps = Default::default();
    let on_manager: Timestamps = Default::default();
    let mut watches = vec![
        measure::record(jobs.clone(), Point::Finished, on_manager.clone())
            .listed()
            .await?,
    ];
    for (w_jobs, w_pods) in worker_jobs.iter().zip(&worker_pods) {
        watches.push(
            record_pods(w_pods.clone(), PodPoint::Running, running.clone())
                .listed()
                .await?,
        );
        watches.push(
            measure::record(w_jobs.clone(), Point::Finished, on_worker.clone())
                .listed()
                .await?,
        );
    }
    let spent = Spent::new(set, n);
    let before = spent.sample();
    let created = at_once(&names, |name| {
        let (jobs, job) = (jobs.clone(), system.job(&ns, &name, SHORT_RUN));
        async move { jobs.create(&PostParams::default(), &job).await.map(|_| ()) }
    })
    .await?;
    let running = wait_all_within(
        "every Pod running on a worker",
        &names,
        &running,
        patience(n),
    )
    .await?;
    let (cpu_to_running, requests_to_running) = spent.since(&before);
    let on_worker =
        wait_all_within("every worker Job finished", &names, &on_worker, patience(n)).await?;
    let status = if matches!(
        system,
        System::Raw | System::KueueAlone | System::KueueCheck
    ) {
        None
    } else {
        let on_manager = wait_all_within(
            "every manager Job shows it",
            &names,
            &on_manager,
            patience(n),
        )
        .await?;
        Some((
            Figures::between(&names, &on_worker, &on_manager),
            seconds_between(&names, &on_worker, &on_manager),
        ))
    };
    watches.iter().for_each(|w| w.stop());
    let running_figures = Figures::between(&names, &created, &running);
    let running_seconds = seconds_between(&names, &created, &running);
    delete_all(&jobs, &names).await?;
    // MultiKueue deletes its remote Jobs and Workloads through the same
    // worker clients, at their pace.
    settled(set, &ns, patience(n)).await?;

    // Second batch: Jobs that run until deleted, then deleted.
    let names: Vec<String> = (0..n).map(|i| format!("long-{i}")).collect();
    let running: Timestamps = Default::default();
    let pods_gone: Timestamps = Default::default();
    let mut watches = Vec::new();
    for w_pods in &worker_pods {
        watches.push(
            record_pods(w_pods.clone(), PodPoint::Running, running.clone())
                .listed()
                .await?,
        );
        watches.push(
            record_pods(w_pods.clone(), PodPoint::Gone, pods_gone.clone())
                .listed()
                .await?,
        );
    }
    at_once(&names, |name| {
        let (jobs, job) = (jobs.clone(), system.job(&ns, &name, "1h"));
        async move { jobs.create(&PostParams::default(), &job).await.map(|_| ()) }
    })
    .await?;
    wait_all_within(
        "every long Job's Pod running",
        &names,
        &running,
        patience(n),
    )
    .await?;
    let deleted = delete_all(&jobs, &names).await?;
    let pods_gone = wait_all_within(
        "every deleted Job's Pod gone from its worker",
        &names,
        &pods_gone,
        patience(n),
    )
    .await?;
    watches.iter().for_each(|w| w.stop());
    let (leaked_jobs, leaked_pods) = left_after(SETTLE, &worker_jobs, &worker_pods).await;
    let (status, status_seconds) = match status {
        Some((figures, seconds)) => (Some(figures), seconds),
        None => (None, Vec::new()),
    };
    Ok(Measured {
        system: system.name(),
        settings: system.settings(),
        running: running_figures,
        status,
        deleted_pods_gone: Figures::between(&names, &deleted, &pods_gone),
        leaked_jobs,
        leaked_pods,
        cpu_to_running,
        requests_to_running,
        latencies: [
            running_seconds,
            status_seconds,
            seconds_between(&names, &deleted, &pods_gone),
        ],
    })
}

/// Per-name latencies in seconds.
fn seconds_between(
    names: &[String],
    from: &HashMap<String, Instant>,
    to: &HashMap<String, Instant>,
) -> Vec<f64> {
    names
        .iter()
        .filter_map(|n| {
            Some(
                to.get(n)?
                    .saturating_duration_since(*from.get(n)?)
                    .as_secs_f64(),
            )
        })
        .collect()
}
