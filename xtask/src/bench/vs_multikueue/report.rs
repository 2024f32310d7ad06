//! What the MultiKueue comparison reports: each system's figures, the table
//! printed to standard output and the chart of latency distributions.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::bench::shared::chart::{self, Axes, Panel, Series};
use crate::bench::shared::figures::Figures;
use crate::bench::shared::machine::Run;
use crate::bench::shared::requests::{self, Count};

/// One system's figures.
#[derive(Debug, Serialize)]
pub(super) struct Measured {
    pub(super) system: &'static str,
    pub(super) settings: &'static str,
    /// Created → Pod running on a worker; its rate is the system's Jobs/s.
    pub(super) running: Figures,
    /// Worker Job finished → the manager Job shows it (none for raw).
    pub(super) status: Option<Figures>,
    /// Deleted → the Pod gone on the worker.
    pub(super) deleted_pods_gone: Figures,
    /// Jobs and Pods of the namespace left on the workers afterwards.
    pub(super) leaked_jobs: usize,
    pub(super) leaked_pods: usize,
    /// CPU seconds by program from the first Job created to the last Pod
    /// running.
    pub(super) cpu_to_running: BTreeMap<String, f64>,
    /// The requests each client made of each API server over the same span.
    pub(super) requests_to_running: Vec<Count>,
    #[serde(skip)]
    pub(super) latencies: [Vec<f64>; 3],
}

#[derive(Debug, Serialize)]
pub(super) struct Report {
    #[serde(flatten)]
    pub(super) run: Run,
    pub(super) systems: Vec<Measured>,
    /// jobrelay behind Kueue's Jobs/s over Kueue alone's.
    pub(super) behind_kueue_ratio_to_kueue_alone: f64,
    /// The same with the workers' Kueue in the way too.
    pub(super) both_kueues_ratio_to_kueue_alone: f64,
}

pub(super) fn print_table(r: &Report) {
    println!();
    println!(
        "{}",
        r.run
            .headline("jobrelay beside MultiKueue", "1 manager + 2 workers")
    );
    println!(
        "{:<28} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}",
        "system",
        "Jobs/s",
        "run p50",
        "run p99",
        "stat p50",
        "stat p95",
        "stat p99",
        "del p50",
        "del p95",
        "del p99",
        "leaks"
    );
    for s in &r.systems {
        let (p50, p95, p99) = s
            .status
            .as_ref()
            .map(|f| {
                (
                    f.p50_ms.to_string(),
                    f.p95_ms.to_string(),
                    f.p99_ms.to_string(),
                )
            })
            .unwrap_or_default();
        println!(
            "{:<28} {:>7.1} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}",
            s.system,
            s.running.jobs_per_second,
            s.running.p50_ms,
            s.running.p99_ms,
            p50,
            p95,
            p99,
            s.deleted_pods_gone.p50_ms,
            s.deleted_pods_gone.p95_ms,
            s.deleted_pods_gone.p99_ms,
            s.leaked_jobs + s.leaked_pods,
        );
    }
    println!("(latencies in ms; leaks: Jobs + Pods left on the workers)");
    println!(
        "jobrelay behind Kueue keeps {:.2} of Kueue's own pace; with Kueue on the workers too, {:.2}",
        r.behind_kueue_ratio_to_kueue_alone, r.both_kueues_ratio_to_kueue_alone
    );
    for s in &r.systems {
        let step = format!("{}, created -> running", s.system);
        crate::bench::shared::table::print_cpu(&step, &s.cpu_to_running, r.run.jobs);
        requests::print(&s.requests_to_running);
    }
}

pub(super) fn draw(path: &Path, r: &Report) -> anyhow::Result<()> {
    let titles = [
        "created -> Pod running on a worker",
        "worker finished -> manager shows it",
        "deleted -> Pod gone on the worker",
    ];
    let panels: Vec<Panel> = titles
        .iter()
        .enumerate()
        .map(|(i, title)| Panel {
            title,
            series: r
                .systems
                .iter()
                .enumerate()
                .filter(|(_, s)| !s.latencies[i].is_empty())
                .map(|(colour, s)| Series {
                    name: s.system,
                    colour,
                    points: chart::cumulative(&s.latencies[i]),
                })
                .collect(),
        })
        .collect();
    chart::render(
        path,
        &format!(
            "{} Jobs: share of Jobs done by each latency (further left is faster)",
            r.run.jobs
        ),
        &Axes {
            x: "latency (s)",
            y: "share of Jobs",
            y_max: 1.0,
            legend: plotters::prelude::SeriesLabelPosition::LowerRight,
        },
        &panels,
    )
}
