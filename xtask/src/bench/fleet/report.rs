//! What the fleet bench reports: each system's makespan against the ideal
//! and the workers' utilisation, as a table on standard output, JSON and a
//! chart of utilisation over time.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::SeriesLabelPosition;
use serde::Serialize;

use super::mix::JobSpec;
use super::usage::{self, Span};
use crate::bench::shared::chart::{self, Axes, Panel, Series};
use crate::bench::shared::figures::ratio;
use crate::bench::shared::machine::Run;
use crate::bench::shared::requests::{self, Count};
use crate::bench::shared::table::print_cpu;
use crate::bench::vs_multikueue::systems::System;

/// How often the utilisation is plotted, in seconds.
const STEP: f64 = 1.0;

/// The run of one system: its makespan and each worker's Pod runs.
pub(super) struct Ran<'a> {
    pub(super) makespan: f64,
    pub(super) ideal: f64,
    /// Each worker's CPUs, in worker order.
    pub(super) cpus: &'a [u32],
    /// Each worker's Pod runs, in worker order.
    pub(super) spans: &'a [Vec<Span>],
}

/// One system's figures.
#[derive(Debug, Serialize)]
pub(super) struct Measured {
    system: &'static str,
    settings: &'static str,
    makespan_seconds: f64,
    /// Makespan over the ideal.
    to_ideal: f64,
    /// The fleet's mean CPU utilisation over the makespan, in percent.
    utilisation: f64,
    /// Each worker's, in worker order.
    worker_utilisation: Vec<f64>,
    /// Each worker's utilisation every [`STEP`] seconds: (s, percent).
    over_time: Vec<Vec<(f64, f64)>>,
    /// CPU seconds by program over the run.
    cpu: BTreeMap<String, f64>,
    requests: Vec<Count>,
}

impl Measured {
    pub(super) fn new(
        system: System,
        ran: &Ran,
        cpu: BTreeMap<String, f64>,
        requests: Vec<Count>,
    ) -> Measured {
        let room = |cpus: u32| i64::from(cpus) * 1000;
        let all: Vec<Span> = ran.spans.iter().flatten().copied().collect();
        let fleet = room(ran.cpus.iter().sum());
        let each = ran.spans.iter().zip(ran.cpus);
        Measured {
            system: system.name(),
            settings: system.settings(),
            makespan_seconds: ran.makespan,
            to_ideal: ratio(ran.makespan, ran.ideal),
            utilisation: usage::mean(&all, fleet, ran.makespan),
            worker_utilisation: each
                .clone()
                .map(|(spans, cpus)| usage::mean(spans, room(*cpus), ran.makespan))
                .collect(),
            over_time: each
                .map(|(spans, cpus)| usage::series(spans, room(*cpus), ran.makespan, STEP))
                .collect(),
            cpu,
            requests,
        }
    }
}

/// The whole run.
#[derive(Debug, Serialize)]
pub(super) struct Report {
    pub(super) run: Run,
    pub(super) seed: u64,
    pub(super) workers: Vec<String>,
    pub(super) worker_cpus: Vec<u32>,
    pub(super) ideal_seconds: f64,
    pub(super) jobs: Vec<JobSpec>,
    pub(super) systems: Vec<Measured>,
}

pub(super) fn print(r: &Report) {
    let work: u64 = r.jobs.iter().map(JobSpec::work).sum();
    println!();
    println!(
        "{}",
        r.run.headline(
            "Fleet bench",
            &format!(
                "workers {:?} with {:?} CPUs; {work} CPU-seconds of work (seed {})",
                r.workers, r.worker_cpus, r.seed
            ),
        )
    );
    println!("ideal makespan: {:.0} s", r.ideal_seconds);
    let workers: Vec<String> = r.workers.iter().map(|w| format!("{w:>9}")).collect();
    println!(
        "{:<32} {:>10} {:>9} {:>11} {}",
        "system",
        "makespan s",
        "× ideal",
        "fleet use %",
        workers.join(" ")
    );
    for s in &r.systems {
        let each: Vec<String> = s
            .worker_utilisation
            .iter()
            .map(|u| format!("{u:>9.1}"))
            .collect();
        println!(
            "{:<32} {:>10.0} {:>9.2} {:>11.1} {}",
            s.system,
            s.makespan_seconds,
            s.to_ideal,
            s.utilisation,
            each.join(" ")
        );
    }
    for s in &r.systems {
        print_cpu(
            &format!("{}, the whole run", s.system),
            &s.cpu,
            r.jobs.len(),
        );
        requests::print(&s.requests);
    }
}

/// One panel per system, one line per worker: its CPU utilisation over
/// the run.
pub(super) fn draw(path: &Path, r: &Report) -> anyhow::Result<()> {
    let panels: Vec<Panel> = r
        .systems
        .iter()
        .map(|s| Panel {
            title: s.system,
            series: s
                .over_time
                .iter()
                .zip(&r.workers)
                .enumerate()
                .map(|(colour, (points, worker))| Series {
                    name: worker,
                    colour,
                    points: points.clone(),
                })
                .collect(),
        })
        .collect();
    chart::render(
        path,
        &format!(
            "{} Jobs on {:?} CPUs: each worker's CPU in use (ideal makespan {:.0} s)",
            r.jobs.len(),
            r.worker_cpus,
            r.ideal_seconds
        ),
        &Axes {
            x: "seconds since the Jobs were created",
            y: "CPU in use (%)",
            y_max: 105.0,
            legend: SeriesLabelPosition::LowerLeft,
        },
        &panels,
    )
}
