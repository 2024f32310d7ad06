//! `cargo xtask bench`: jobrelay measured on the local clusters (1 manager +
//! 2 workers), side by side with what the API servers allow on their own, in
//! one run:
//!
//! - raw limit: N Jobs created straight on a worker, and on the manager, by a
//!   tight concurrent client;
//! - dispatch: N manager Jobs created at once until every mirror exists;
//! - status: a worker Job finished until its manager Job shows it;
//! - burst: N short Jobs created at once until the last shows finished on
//!   the manager, against the same burst straight on a worker;
//! - offered load: manager Jobs created at 0.8 × the raw run's rate until
//!   each mirror exists;
//! - cleanup: N manager Jobs deleted at once until each is released (after
//!   its MirrorGone), against deleting N Jobs straight on a worker with
//!   Background propagation and waiting for their Pods;
//! - resync: an agent restarted while holding its mirrors, until it has its
//!   DesiredSet;
//! - dispatch beside a retention backlog: N Jobs dispatched while 5,000
//!   expired manager Jobs are deleted at the retention pace;
//! - takeover: the leading manager replica (of two, elected with the
//!   default lease settings) killed, until the other has dispatched a Job
//!   created right after the kill;
//! - takeover in a rollout: as a Deployment's rolling update does it, a new
//!   replica started and Ready, then the leader stopped with SIGTERM (it
//!   releases the Lease), until another replica holds the Lease, every agent
//!   has a session with it, and a Job created right after is dispatched;
//!   the other old replica is then replaced the same way;
//! - memory: peak resident memory of the manager replicas and the agents;
//! - CPU: seconds used by each program of the clusters during each step.
//!
//! Before all that, the micro-benchmarks of the hot pure paths run
//! (`cargo bench`: Job sanitising, status copy, DesiredSet diff); `--micro`
//! runs only those.
//!
//! The table goes to standard output and, as JSON, to `target/bench/`.
//!
//! A folder per mode: `jobs/` (the run above, `--jobs`), `clusters/`
//! (`--clusters`, a simulated fleet), `vs_multikueue/` (`--vs-multikueue`),
//! `fleet/` (`--fleet`, room running out on uneven workers);
//! `shared/` holds what they all measure and report with.

mod clusters;
mod fleet;
mod jobs;
mod shared;
mod vs_multikueue;

use jobrelay_testbed::cluster::ClusterSet;
use jobrelay_testbed::cluster::supervisor::Supervisor;
use jobrelay_testbed::go::upstream;
use jobrelay_testbed::relay::Options;
use jobrelay_testbed::relay::binaries::Profile;

use crate::{log, supervisor_command, workspace_root};

#[derive(clap::Args)]
pub struct Args {
    /// Jobs per run; repeat for several sizes.
    #[arg(long = "jobs", default_values_t = [1000])]
    jobs: Vec<usize>,
    /// Also run with 10,000 Jobs (takes a long time on 2 cores).
    #[arg(long)]
    with_10k: bool,
    /// Run only the micro-benchmarks of the hot pure paths (no clusters).
    #[arg(long, conflicts_with_all = ["jobs", "with_10k"])]
    micro: bool,
    /// Compare with Kueue's MultiKueue instead: raw, jobrelay standalone,
    /// jobrelay behind Kueue and MultiKueue, on the same clusters and Jobs.
    #[arg(long, conflicts_with_all = ["with_10k", "micro"])]
    vs_multikueue: bool,
    /// Measure the manager with a simulated fleet of this many workers
    /// (sizes comma-separated, e.g. 2,10,100,1000), each with a real
    /// session; only the workers are simulated.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["with_10k", "micro", "vs_multikueue"])]
    clusters: Vec<usize>,
    /// Jobs dispatched over the simulated fleet at each size.
    #[arg(long, default_value_t = 10_000, requires = "clusters")]
    cluster_jobs: usize,
    /// Run a mix of Jobs of several sizes over workers of uneven, finite
    /// room, with jobrelay and with MultiKueue: makespan against the ideal,
    /// and each worker's utilisation.
    #[arg(long, conflicts_with_all = ["with_10k", "micro", "vs_multikueue", "clusters"])]
    fleet: bool,
    /// Jobs in the fleet mix.
    #[arg(long, default_value_t = 60, requires = "fleet")]
    fleet_jobs: usize,
    /// The systems the fleet mix runs with, in this order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "standalone,kueue,multikueue",
        value_parser = fleet::SYSTEM_NAMES,
        requires = "fleet"
    )]
    fleet_systems: Vec<String>,
    /// Which Events the manager records on Jobs (its `--job-events`).
    #[arg(long, default_value = "steps", value_parser = ["steps", "problems"])]
    job_events: String,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    if !args.clusters.is_empty() {
        return clusters::run(&args.clusters, args.cluster_jobs).await;
    }
    if args.fleet {
        return fleet::run(args.fleet_jobs, &args.fleet_systems).await;
    }
    if args.vs_multikueue {
        return vs_multikueue::run(&args.jobs).await;
    }
    // The pure paths first: quick, and undisturbed by running clusters.
    crate::test::cargo(
        &[
            "bench",
            "-p",
            "jobrelay-manager",
            "-p",
            "jobrelay-agent",
            "--bench",
            "*",
        ],
        &[],
    )?;
    if args.micro {
        return Ok(());
    }
    jobs::run(&args.jobs, args.with_10k, &args.job_events).await
}

/// A manager and two workers, in a state folder named for `what` and this
/// process; the control plane is built first if it is not cached.
pub(crate) fn start_clusters(what: &str) -> anyhow::Result<(Supervisor, ClusterSet)> {
    upstream::ensure_built(&mut log)?;
    let state_dir = workspace_root()
        .join("target")
        .join("jobrelay")
        .join(format!("{what}-{}", std::process::id()));
    let supervisor = Supervisor::start(supervisor_command()?, &state_dir, 2, false)?;
    let set = supervisor.set().clone();
    Ok((supervisor, set))
}

/// Optimised binaries logging what an operator would see, as in production.
pub(crate) fn release_options() -> Options {
    Options {
        profile: Profile::Release,
        log_filter: Some("info,kube=warn".into()),
        ..Options::default()
    }
}
