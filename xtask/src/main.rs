//! `cargo xtask`: the project's own set-up and test commands.
//!
//! - `k8s`: build the upstream control plane from Go modules (cached).
//! - `cluster up|down`: local manager and worker clusters on loopback.
//! - `demo`: the main job, end to end on local clusters.
//! - `test`: every unit and end-to-end test, clusters included.
//! - `bench`: latency and memory of jobrelay on local clusters.
//! - `image`: OCI images of the manager and the agent, without a daemon.

mod bench;
mod demo;
mod image;
mod test;
#[cfg(test)]
mod tree;

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use clap::{Parser, Subcommand};
use jobrelay_testbed::cluster::supervisor::{self, SuperviseArgs, Supervisor};
use jobrelay_testbed::go::controlplane::seconds;
use jobrelay_testbed::go::upstream;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Build, run and test jobrelay locally")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build (or reuse) the pinned Kubernetes control plane, etcd, kwok, kubectl and helm.
    K8s,
    /// Start or stop local clusters.
    Cluster {
        #[command(subcommand)]
        command: ClusterCmd,
    },
    /// Run jobrelay end to end on local clusters.
    Demo(demo::Args),
    /// Run every unit and end-to-end test.
    Test(test::Args),
    /// Measure jobrelay on local clusters.
    Bench(bench::Args),
    /// Build an OCI image of the manager and of the agent (no daemon needed).
    Image(image::Options),
}

#[derive(Subcommand)]
enum ClusterCmd {
    /// Start one manager and N worker clusters in the background and print `export` lines.
    Up {
        #[arg(long, default_value_t = 2)]
        workers: usize,
    },
    /// Stop the clusters started by `up` and remove their state.
    Down,
    /// Run a cluster supervisor in the foreground (used by `up` and `demo`).
    #[command(hide = true)]
    Supervise(SuperviseArgs),
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("Error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Cmd::K8s => {
            let started = Instant::now();
            upstream::ensure_built(&mut log)?;
            jobrelay_testbed::cluster::node::ensure_node_runtime_built(&mut log)?;
            log(&format!("done in {}", seconds(started.elapsed())));
            Ok(())
        }
        Cmd::Cluster {
            command: ClusterCmd::Up { workers },
        } => cluster_up(workers),
        Cmd::Cluster {
            command: ClusterCmd::Down,
        } => runtime.block_on(cluster_down()),
        Cmd::Cluster {
            command: ClusterCmd::Supervise(args),
        } => runtime.block_on(supervisor::supervise(args)),
        Cmd::Demo(args) => runtime.block_on(demo::run(args)),
        Cmd::Test(args) => test::run(args),
        Cmd::Image(options) => image::run(options),
        // The bench measures with an optimised build of itself: its watches
        // and requests share the cores with what it measures.
        Cmd::Bench(_) if cfg!(debug_assertions) => run_optimised(),
        Cmd::Bench(args) => runtime.block_on(bench::run(args)),
    }
}

/// This command again, from an optimised build of this program.
fn run_optimised() -> anyhow::Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["run", "--quiet", "--release", "--package", "xtask", "--"])
        .args(std::env::args_os().skip(1))
        .status()?;
    anyhow::ensure!(status.success(), "the optimised bench failed ({status})");
    Ok(())
}

/// Progress for people, on standard error (standard output is for `export` lines).
pub fn log(line: &str) {
    eprintln!("xtask: {line}");
}

/// The workspace root (xtask lives one level below it).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn cluster_state_dir() -> PathBuf {
    workspace_root()
        .join("target")
        .join("jobrelay")
        .join("cluster")
}

/// This program re-run as a cluster supervisor.
pub fn supervisor_command() -> anyhow::Result<Command> {
    let mut command = Command::new(std::env::current_exe()?);
    command.args(["cluster", "supervise"]);
    Ok(command)
}

fn cluster_up(workers: usize) -> anyhow::Result<()> {
    upstream::ensure_built(&mut log)?;
    let state_dir = cluster_state_dir();
    if state_dir.join("clusters.json").exists() {
        anyhow::bail!(
            "clusters are already up in {} (run `cargo xtask cluster down` first)",
            state_dir.display()
        );
    }
    let started = Instant::now();
    let supervisor = Supervisor::start(supervisor_command()?, &state_dir, workers, true)?;
    log(&format!(
        "1 manager + {workers} worker cluster(s) up in {}; logs in {}/logs; stop with `cargo xtask cluster down`",
        seconds(started.elapsed()),
        state_dir.display()
    ));
    println!("{}", supervisor.set().export_lines());
    Ok(())
}

async fn cluster_down() -> anyhow::Result<()> {
    let state_dir = cluster_state_dir();
    if supervisor::stop_detached(&state_dir).await? {
        log("clusters stopped, state removed");
    } else {
        log("no clusters were up");
    }
    Ok(())
}
