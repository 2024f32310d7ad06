//! jobrelay's own binaries, built by cargo on first use, as the tests and
//! the bench run them.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `jobrelay-manager` and `jobrelay-agent` (unoptimised, as the tests
/// run them) and returns their paths.
pub fn binaries() -> anyhow::Result<(PathBuf, PathBuf)> {
    binaries_of(Profile::Debug)
}

/// How the binaries are compiled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Profile {
    /// Quick to build; what the tests run.
    #[default]
    Debug,
    /// Optimised, as released; what benchmarks run.
    Release,
}

/// Builds `jobrelay-manager` and `jobrelay-agent` in `profile` and returns
/// their paths.
pub fn binaries_of(profile: Profile) -> anyhow::Result<(PathBuf, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    // The same package set as `cargo test -p jobrelay-e2e`, so both share every artifact.
    build.current_dir(&root).args([
        "build",
        "--quiet",
        "-p",
        "jobrelay-e2e",
        "-p",
        "jobrelay-manager",
        "-p",
        "jobrelay-agent",
        "--bins",
    ]);
    if profile == Profile::Release {
        build.arg("--release");
    }
    let status = build.status()?;
    anyhow::ensure!(
        status.success(),
        "building jobrelay-manager and jobrelay-agent failed ({status})"
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join(match profile {
        Profile::Debug => "debug",
        Profile::Release => "release",
    });
    Ok((bin.join("jobrelay-manager"), bin.join("jobrelay-agent")))
}
