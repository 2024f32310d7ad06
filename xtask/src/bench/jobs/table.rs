//! The full run's table on standard output.

use super::ceiling;
use super::one_size::Report;
use crate::bench::shared::table::{print_cpu, row};
use crate::bench::shared::{histogram, requests};

pub(super) fn print_table(r: &Report) {
    println!();
    println!(
        "{}",
        r.run.headline(
            "jobrelay bench",
            &format!("2 manager replicas + 2 workers on {} cores", r.cores)
        )
    );
    println!(
        "{:<44} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "measure", "Jobs/s", "p50 ms", "p95 ms", "p99 ms", "max ms"
    );
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
    // `at` is "at most" for a ceiling, "at least" for a floor.
    let bounded = |what: &str, ratio: f64, bound: &ceiling::Bound, at: &str| {
        println!(
            "{what:<44} {ratio:>9.2} (the cores allow {at} {:.2}; {:.2} with the manager's cluster apart)",
            bound.this_machine, bound.manager_apart
        );
    };
    bounded(
        "  Pod running, ratio to raw run",
        r.dispatch_running_ratio_to_raw_run,
        &r.dispatch_running_ceiling,
        "at most",
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
    account("write request", &r.status_write);
    account("wrote", &r.status_written);
    println!(
        "{:<44} {:>9.2}",
        "  status writes per Job", r.status_writes_per_job
    );
    row("burst raw: N short Jobs on a worker -> done", &r.burst_raw);
    row("burst: N short manager Jobs -> shown done", &r.burst);
    bounded(
        "  time ratio to the raw burst",
        r.burst_time_ratio_to_raw,
        &r.burst_floor,
        "at least",
    );
    row(
        &format!(
            "offered {:.1}/s: manager Job -> mirror",
            r.offered_per_second
        ),
        &r.offered,
    );
    account("sent -> held", &r.offered_held);
    row("cleanup: delete manager Job -> released", &r.cleanup);
    account("sent -> gone", &r.cleanup_confirmed);
    row(
        "cleanup direct: Background delete, Pod gone",
        &r.cleanup_direct,
    );
    bounded(
        "  ratio to direct cleanup",
        r.cleanup_ratio_to_direct,
        &r.cleanup_ceiling,
        "at most",
    );
    let api = &r.workers_api;
    println!(
        "{:<44} {:>9.1} ms/Job relayed, {:.1} direct: {:.2}",
        "workers' API CPU to Pod running, less idle",
        api.dispatch_ms_per_job,
        api.direct_run_ms_per_job,
        api.dispatch_ratio
    );
    println!(
        "{:<44} {:>9.1} ms/Job relayed, {:.1} direct: {:.2}",
        "workers' API CPU to clean up, less idle",
        api.cleanup_ms_per_job,
        api.direct_cleanup_ms_per_job,
        api.cleanup_ratio
    );
    println!(
        "{:<44} {:>9.1} s ({} mirrors)",
        "resync: agent restarted -> DesiredSet", r.resync.seconds, r.resync.mirrors
    );
    let part = |s: Option<f64>| s.map_or("?".to_string(), |s| format!("{s:.1} s"));
    println!(
        "{:<44} {:>9} / {}",
        "  started -> session open / -> DesiredSet",
        part(r.resync.to_open_seconds),
        part(r.resync.to_desired_seconds)
    );
    println!(
        "{:<44} {:>9.1} s",
        "takeover: leader killed -> Job dispatched", r.takeover_seconds
    );
    let rollout = &r.takeover_in_rollout;
    println!(
        "{:<44} {:>9.1} s",
        "rollout: leader SIGTERM -> Job dispatched", rollout.dispatch_seconds
    );
    println!(
        "{:<44} {:>9.1} s / {:.1} s",
        "  -> Lease taken / -> every agent's session",
        rollout.lease_seconds,
        rollout.sessions_seconds
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
    let after: Vec<String> = r
        .leader_peak_rss_mib_after
        .iter()
        .map(|(step, mib)| format!("{step} {mib}"))
        .collect();
    println!(
        "{:<44} {} (MiB)",
        "peak RSS manager so far, after each step",
        after.join(", ")
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
        print_cpu(step, used, r.run.jobs);
        if let Some(counts) = r.requests.get(step) {
            requests::print(counts);
        }
    }
}
