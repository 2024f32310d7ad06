//! `cargo xtask test`: formatting and lints, unit tests of every crate, then
//! every end-to-end target against real clusters (each target starts and
//! stops its own; two run side by side, [`lanes`]), building the control
//! plane first if it is not cached; last, that the real nodes left nothing
//! on the host.

use std::process::Command;
use std::time::Instant;

use jobrelay_testbed::go::controlplane::{self, seconds};
use jobrelay_testbed::go::upstream;

use crate::{log, workspace_root};

mod lanes;

/// How long the last test process's clusters get to stop.
const NODES_STOP: std::time::Duration = std::time::Duration::from_secs(90);

#[derive(clap::Args)]
pub struct Args {
    /// Only the unit tests (no clusters).
    #[arg(long)]
    unit: bool,
    /// How many end-to-end targets run side by side.
    #[arg(long, default_value_t = 2)]
    lanes: usize,
    /// Arguments passed on to the end-to-end test binaries (e.g. a test name filter).
    #[arg(last = true)]
    rest: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    cargo(&["fmt", "--all", "--", "--check"], &[])?;
    cargo(
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    cargo(&["test", "--workspace", "--exclude", "jobrelay-e2e"], &[])?;
    cargo(&["test", "-p", "jobrelay-e2e", "--lib", "--bins"], &[])?;
    if args.unit {
        return Ok(());
    }
    upstream::ensure_built(&mut log)?;
    jobrelay_testbed::cluster::node::ensure_node_runtime_built(&mut log)?;
    jobrelay_testbed::go::kueue_build::ensure_kueue_built(&mut log)?;
    jobrelay_testbed::go::jobset_build::ensure_jobset_built(&mut log)?;
    jobrelay_testbed::go::certmanager_build::ensure_cert_manager_built(&mut log)?;
    jobrelay_testbed::go::registry_build::ensure_registry_built(&mut log)?;
    controlplane::trim_go_build_cache(&mut log)?;
    // The upgrade proof installs the previous release first: built once
    // per commit, before this tree's, whose binaries cargo then puts back
    // in place.
    crate::image::earlier::release(jobrelay_testbed::deploy::release::PREVIOUS)?;
    // The deploy test runs the images users run, built once here.
    let images = crate::image::build_images(&crate::image::Options::default())?;
    let listed = images
        .first()
        .and_then(|image| image.tar.parent())
        .map(|dir| dir.join("images.json"))
        .ok_or_else(|| anyhow::anyhow!("cargo xtask image built no image"))?;
    let executables = lanes::executables(&built_tests()?);
    let manifest = std::fs::read_to_string(workspace_root().join("tests/Cargo.toml"))?;
    let jobs = lanes::jobs(&lanes::targets(&manifest)).map_err(anyhow::Error::msg)?;
    lanes::run(
        jobs,
        &executables,
        args.lanes,
        &args.rest,
        &[("JOBRELAY_IMAGES", listed.as_os_str())],
    )?;
    // Each test process's clusters stop after it ends; their real nodes
    // must leave nothing on the host.
    let left = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(jobrelay_testbed::cluster::node::host_leftovers(NODES_STOP));
    anyhow::ensure!(
        left.is_empty(),
        "the real nodes left this on the host:\n  {}",
        left.join("\n  ")
    );
    log(&format!(
        "all tests passed in {}",
        seconds(started.elapsed())
    ));
    Ok(())
}

/// Builds the end-to-end test binaries; cargo's JSON messages, which name
/// them.
fn built_tests() -> anyhow::Result<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let args = ["test", "-p", "jobrelay-e2e", "--tests", "--no-run"];
    log(&format!("cargo {}", args.join(" ")));
    let output = Command::new(cargo)
        .current_dir(workspace_root())
        .args(args)
        .arg("--message-format=json-render-diagnostics")
        .stderr(std::process::Stdio::inherit())
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "cargo {} failed ({})",
        args.join(" "),
        output.status
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs cargo with `args`, then `--` and `test_args` if there are any.
pub fn cargo(args: &[&str], test_args: &[String]) -> anyhow::Result<()> {
    cargo_with(args, test_args, &[])
}

/// Like [`cargo`], with more environment variables.
fn cargo_with(
    args: &[&str],
    test_args: &[String],
    env: &[(&str, &std::ffi::OsStr)],
) -> anyhow::Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root()).args(args);
    cmd.envs(env.iter().copied());
    if !test_args.is_empty() {
        cmd.arg("--").args(test_args);
    }
    log(&format!("cargo {}", args.join(" ")));
    let status = cmd.status()?;
    anyhow::ensure!(
        status.success(),
        "cargo {} failed ({status})",
        args.join(" ")
    );
    Ok(())
}
