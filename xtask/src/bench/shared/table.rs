//! The lines every bench's table is made of, on standard output.

use std::collections::BTreeMap;

use super::figures::Figures;

/// One measure's line: its rate and latencies.
pub(crate) fn row(what: &str, f: &Figures) {
    println!(
        "{what:<44} {:>9.1} {:>8} {:>8} {:>8} {:>8}",
        f.jobs_per_second, f.p50_ms, f.p95_ms, f.p99_ms, f.max_ms
    );
}

/// One line: the CPU each program spent during `step` of `jobs` Jobs, the
/// largest first, in seconds and per Job.
pub(crate) fn print_cpu(step: &str, used: &BTreeMap<String, f64>, jobs: usize) {
    let total: f64 = used.values().sum();
    let mut used: Vec<_> = used.iter().filter(|(_, s)| **s >= 0.05).collect();
    used.sort_by(|a, b| b.1.total_cmp(a.1));
    let each: Vec<String> = used
        .iter()
        .map(|(program, s)| {
            let per_job = **s * 1000.0 / jobs as f64;
            format!("{program} {s:.1} s ({per_job:.1} ms/Job)")
        })
        .collect();
    let per_job = total * 1000.0 / jobs as f64;
    println!(
        "CPU during {step}: {total:.1} s in all ({per_job:.1} ms/Job): {}",
        each.join(", ")
    );
}
