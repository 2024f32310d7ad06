//! `cargo xtask bench --fleet`: a mix of Jobs of several sizes and run times
//! over workers of uneven, finite room (kwok Nodes with declared CPUs, the
//! real kube-scheduler fitting the Pods), run by each system in turn:
//!
//! - jobrelay standalone: relayed Jobs, placed where they fit, waiting on
//!   the manager while they fit nowhere;
//! - jobrelay behind Kueue: the same Jobs queued in a manager ClusterQueue
//!   whose quota is the fleet's room, behind jobrelay's AdmissionCheck;
//! - MultiKueue (its default AllAtOnce dispatcher): the manager's quota is
//!   the fleet's room, each worker's Kueue has a quota of that worker's room.
//!
//! For each: the makespan (first Job created to last shown finished on the
//! manager) against the ideal (the mix's CPU-seconds over the fleet's CPUs,
//! never less than its longest Job), and the workers' CPU utilisation over
//! the run — mean and plotted, one line per worker.

mod mix;
mod report;
mod usage;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_testbed::cluster::pools::{NodePool, POOL_LABEL};
use jobrelay_testbed::cluster::room::FiniteRoom;
use jobrelay_testbed::cluster::{ClusterInfo, ClusterSet};
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::objects::kueue_objects;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};

use crate::bench::shared::jobs::{delete_all, settled};
use crate::bench::shared::machine::{Run, Spent};
use crate::bench::shared::measure::{self, Point, Timestamps, at_once, wait_all_within};
use crate::bench::vs_multikueue::{setup, systems::System};
use crate::{log, workspace_root};
use mix::JobSpec;
use report::{Measured, Ran, Report};
use usage::Spans;

/// The systems that may be compared, by the name `--fleet-systems` gives.
const SYSTEMS: [(&str, System); 3] = [
    ("standalone", System::Standalone),
    ("kueue", System::JobrelayKueue),
    ("multikueue", System::MultiKueue),
];
/// The names `--fleet-systems` takes.
pub const SYSTEM_NAMES: [&str; 3] = [SYSTEMS[0].0, SYSTEMS[1].0, SYSTEMS[2].0];
/// The mix's seed: every run draws the same Jobs.
const SEED: u64 = 49;
/// How long the workers' room may take to show on the manager.
const ROOM_SHOWN: Duration = Duration::from_secs(60);

pub async fn run(n: usize, names: &[String]) -> anyhow::Result<()> {
    let systems: Vec<System> = names
        .iter()
        .filter_map(|name| SYSTEMS.iter().find(|(n, _)| n == name).map(|(_, s)| *s))
        .collect();
    let clusters = setup::WithKueue::start("bench-fleet").await?;
    let set = &clusters.set;
    let pools = mix::pools();
    let mut rooms = Vec::new();
    for (worker, pool) in set.workers().iter().zip(&pools) {
        let mut room = FiniteRoom::take(worker).await?;
        room.add_pool(pool).await?;
        rooms.push(room);
        room_shown(set, worker, pool).await?;
    }
    let jobs = mix::mix(n, SEED);
    let cpus: Vec<u32> = pools.iter().map(mix::cpus).collect();
    let ideal = mix::ideal_seconds(&jobs, cpus.iter().sum());
    log(&format!(
        "{n} Jobs on {cpus:?} CPUs; ideal makespan {ideal:.0} s"
    ));
    let run = Run::start(n);
    let mut measured = Vec::new();
    for system in systems {
        log(&format!("{}: {n} Jobs", system.name()));
        measured.push(measure_system(set, system, &jobs, &cpus, ideal).await?);
    }
    let report = Report {
        run: run.ended(),
        seed: SEED,
        workers: set.workers().iter().map(|w| w.name.clone()).collect(),
        worker_cpus: cpus,
        ideal_seconds: ideal,
        jobs,
        systems: measured,
    };
    report::print(&report);
    let out = workspace_root().join("target").join("bench");
    std::fs::create_dir_all(&out)?;
    let json = out.join(format!("fleet-{n}.json"));
    std::fs::write(&json, serde_json::to_string_pretty(&report)?)?;
    let svg = out.join(format!("fleet-{n}.svg"));
    report::draw(&svg, &report)?;
    log(&format!("wrote {} and {}", json.display(), svg.display()));
    for room in rooms {
        room.give_back().await?;
    }
    clusters.stop()
}

/// Waits until the manager shows `worker`'s room as `pool` alone.
async fn room_shown(set: &ClusterSet, worker: &ClusterInfo, pool: &NodePool) -> anyhow::Result<()> {
    let clusters: Api<WorkerCluster> = Api::all(set.manager().client().await?);
    wait::try_until(
        format!("the manager shows {}'s room", worker.name),
        ROOM_SHOWN,
        || async {
            let room = match clusters.get(&worker.name).await {
                Ok(cluster) => cluster.status.and_then(|s| s.room).unwrap_or_default(),
                Err(e) => return Seen::Waiting(e.to_string()),
            };
            let names: Vec<&str> = room
                .iter()
                .filter_map(|p| p.labels.get(POOL_LABEL).map(String::as_str))
                .collect();
            match names == [pool.name()] && room.len() == 1 {
                true => Seen::Ready(()),
                false => Seen::Waiting(format!("{room:?}")),
            }
        },
    )
    .await?;
    Ok(())
}

/// Runs the mix with `system` and measures it.
async fn measure_system(
    set: &ClusterSet,
    system: System,
    jobs: &[JobSpec],
    cpus: &[u32],
    ideal: f64,
) -> anyhow::Result<Measured> {
    let ns = format!("fleet-{}", system.namespace(jobs.len()));
    for cluster in &set.clusters {
        kit::create_namespace(&cluster.client().await?, &ns).await;
    }
    let manager = set.manager().client().await?;
    // The manager's quota is the fleet's room, behind the system's check.
    let check = match system {
        System::JobrelayKueue => Some("jobrelay"),
        System::MultiKueue => Some("multikueue"),
        _ => None,
    };
    if let Some(check) = check {
        let fleet: u32 = cpus.iter().sum();
        kueue_objects::queue_named(
            &manager,
            &ns,
            &ns,
            kueue_objects::LOCAL_QUEUE,
            fleet,
            &[check],
        )
        .await?;
    }
    // MultiKueue's workers: each Kueue's quota is that worker's room.
    if system == System::MultiKueue {
        for (worker, cpus) in set.workers().iter().zip(cpus) {
            let client = worker.client().await?;
            let queue = kueue_objects::LOCAL_QUEUE;
            kueue_objects::queue_named(&client, &ns, &ns, queue, *cpus, &[]).await?;
        }
    }
    let api: Api<Job> = Api::namespaced(manager, &ns);
    let finished: Timestamps = Default::default();
    let mut watches = vec![
        measure::record(api.clone(), Point::Finished, finished.clone())
            .listed()
            .await?,
    ];
    let mut spans: Vec<Spans> = Vec::new();
    for worker in set.workers() {
        let pods: Api<Pod> = Api::namespaced(worker.client().await?, &ns);
        let seen = Spans::default();
        watches.push(usage::record(pods, seen.clone()).listed().await?);
        spans.push(seen);
    }
    let names: Vec<String> = jobs.iter().map(|j| j.name.clone()).collect();
    let built: HashMap<&str, Job> = jobs
        .iter()
        .map(|spec| (spec.name.as_str(), build(system, &ns, spec)))
        .collect();
    let spent = Spent::new(set, jobs.len());
    let before = spent.sample();
    let zero = Instant::now();
    at_once(&names, |name| {
        // Every name is one of the mix's.
        let (api, job) = (api.clone(), built[name.as_str()].clone());
        async move { api.create(&PostParams::default(), &job).await.map(|_| ()) }
    })
    .await?;
    let patience = Duration::from_secs_f64(ideal * 4.0 + 300.0);
    let done = wait_all_within("every manager Job finished", &names, &finished, patience).await?;
    let (cpu, requests) = spent.since(&before);
    watches.iter().for_each(|w| w.stop());
    let makespan = done
        .values()
        .map(|at| at.saturating_duration_since(zero).as_secs_f64())
        .fold(0.0, f64::max);
    let spans: Vec<Vec<usage::Span>> = spans.iter().map(|s| s.since(zero)).collect();
    log(&format!(
        "{}: makespan {makespan:.0} s (ideal {ideal:.0} s)",
        system.name()
    ));
    delete_all(&api, &names).await?;
    settled(set, &ns, patience).await?;
    let ran = Ran {
        makespan,
        ideal,
        cpus,
        spans: &spans,
    };
    Ok(Measured::new(system, &ran, cpu, requests))
}

/// The manager Job of `spec` as `system` takes it.
fn build(system: System, ns: &str, spec: &JobSpec) -> Job {
    let pods = i32::try_from(spec.pods).unwrap_or(1);
    system.dress(
        TestJob::new(ns, &spec.name)
            .parallelism(pods, pods)
            .cpu(&spec.cpu.to_string())
            .run_for(&format!("{}s", spec.seconds)),
    )
}
