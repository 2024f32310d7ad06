//! The full run, `cargo xtask bench [--jobs N…]`: each size's steps on a
//! manager of two replicas and two workers (see [`one_size`]), then the
//! JobSets; a table for each and its JSON in `target/bench/`.

mod backlog;
mod ceiling;
mod jobsets;
mod load;
mod one_size;
mod replicas;
mod resync;
mod rollout;
mod status;
mod table;
mod upkeep;

use jobrelay_testbed::relay::{Options, Relay};

use super::{release_options, start_clusters};
use crate::{log, workspace_root};
use one_size::bench;

/// Every size of `sizes` (and 10,000 with `with_10k`) in turn, then the
/// JobSets; the manager records Events as `--job-events={job_events}`.
pub(super) async fn run(sizes: &[usize], with_10k: bool, job_events: &str) -> anyhow::Result<()> {
    let (supervisor, set) = start_clusters("bench")?;
    let options = Options {
        manager_config: Some(backlog::MANAGER_CONFIG.into()),
        manager_replicas: 2,
        // Where the rollout's new replica starts.
        manager_surge: 1,
        manager_args: vec![format!("--job-events={}", job_events)],
        ..release_options()
    };
    log(&format!("the manager records Events: {}", job_events));
    let jobset_controller = jobsets::prepare(&set).await?;
    let relay = Relay::start_with(&set, options).await?;
    let mut runs = sizes.to_vec();
    if with_10k {
        runs.push(10_000);
    }
    let out = workspace_root().join("target").join("bench");
    std::fs::create_dir_all(&out)?;
    for n in runs {
        let report = bench(&set, &relay, n).await?;
        table::print_table(&report);
        let path = out.join(format!("bench-{n}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
        log(&format!("wrote {}", path.display()));
    }
    // A tenth as many JobSets of four Pods as the first size's Jobs.
    let sets = (sizes.first().copied().unwrap_or(1000) / 10).max(10);
    let report = jobsets::bench(&set, sets).await?;
    jobsets::print(&report);
    let path = out.join(format!("bench-jobsets-{sets}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)?;
    log(&format!("wrote {}", path.display()));
    drop(relay);
    jobset_controller.kill();
    supervisor.stop()
}
