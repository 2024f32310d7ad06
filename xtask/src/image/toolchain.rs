//! What a static build for every image platform needs beyond cargo: each
//! platform's Rust standard library for musl (`rustup target add`), zig as
//! the C compiler and linker for those targets (ring and jemalloc have C
//! in them; zig carries musl's headers and sources for every machine), and
//! cargo-zigbuild, which runs cargo with it. zig comes from its PyPI wheel
//! and cargo-zigbuild from crates.io; each is fetched once and kept in the
//! cache by its version.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use jobrelay_testbed::go::controlplane::{STAMP, cache_root, complete, run};

use crate::log;

/// The zig release (the `ziglang` wheel's version).
const ZIG_VERSION: &str = "0.17.1";
/// The cargo-zigbuild release.
const CARGO_ZIGBUILD_VERSION: &str = "0.24.1";
/// How long one `rustup target add` may take before it is tried again.
const RUSTUP_TIMEOUT: &str = "180";

/// zig and cargo-zigbuild, ready to build.
pub(super) struct Toolchain {
    /// The folder holding the `zig` executable.
    zig_dir: PathBuf,
    cargo_zigbuild: PathBuf,
}

impl Toolchain {
    /// Fetches what is not cached yet, and adds the Rust targets rustup
    /// lacks.
    pub(super) fn ensure(targets: &[&str]) -> anyhow::Result<Self> {
        add_rust_targets(targets)?;
        Ok(Toolchain {
            zig_dir: zig()?,
            cargo_zigbuild: cargo_zigbuild()?,
        })
    }

    /// `cargo zigbuild`, set up by `in_tree` (the tree it builds), with zig
    /// first on `PATH`; the caller adds the rest of cargo's arguments.
    pub(super) fn zigbuild(
        &self,
        in_tree: impl FnOnce(&Path) -> Command,
    ) -> anyhow::Result<Command> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(
            std::iter::once(self.zig_dir.clone()).chain(std::env::split_paths(&path)),
        )?;
        let mut command = in_tree(&self.cargo_zigbuild);
        command.arg("zigbuild").env("PATH", path);
        Ok(command)
    }
}

/// The Rust targets of `targets` that rustup has not installed yet.
fn missing_targets<'a>(installed: &str, targets: &[&'a str]) -> Vec<&'a str> {
    let installed: Vec<&str> = installed.lines().map(str::trim).collect();
    targets
        .iter()
        .copied()
        .filter(|target| !installed.contains(target))
        .collect()
}

fn add_rust_targets(targets: &[&str]) -> anyhow::Result<()> {
    let output = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .context("running rustup target list --installed")?;
    anyhow::ensure!(
        output.status.success(),
        "rustup target list --installed failed ({})",
        output.status
    );
    let missing = missing_targets(&String::from_utf8_lossy(&output.stdout), targets);
    if missing.is_empty() {
        return Ok(());
    }
    // A download that stalls is cut off and tried again.
    let mut last = None;
    for attempt in 1..=3 {
        log(&format!(
            "rustup target add {} (attempt {attempt})",
            missing.join(" ")
        ));
        let mut command = Command::new("timeout");
        command
            .arg(RUSTUP_TIMEOUT)
            .args(["rustup", "target", "add"])
            .args(&missing);
        if attempt > 1 {
            // rustup's other download backend, for when the first stalls.
            command.env("RUSTUP_USE_CURL", "1");
        }
        let status = command.status().context("running rustup target add")?;
        if status.success() {
            return Ok(());
        }
        last = Some(status);
    }
    anyhow::bail!(
        "rustup target add {} failed three times (last: {})",
        missing.join(" "),
        last.map(|s| s.to_string()).unwrap_or_default()
    )
}

/// The folder holding zig `ZIG_VERSION`, unpacked from its wheel.
fn zig() -> anyhow::Result<PathBuf> {
    let dir = cache_root().join("zig").join(ZIG_VERSION);
    let zig_dir = dir.join("ziglang");
    if dir.join(STAMP).is_file() {
        return Ok(zig_dir);
    }
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial)?;
    log(&format!("fetching zig {ZIG_VERSION} (the ziglang wheel)"));
    run(Command::new("python3")
        .args(["-m", "pip", "download", "--quiet", "--no-deps"])
        .args(["--only-binary=:all:", "--dest"])
        .arg(&partial)
        .arg(format!("ziglang=={ZIG_VERSION}")))?;
    let wheel = std::fs::read_dir(&partial)?
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|e| e == "whl"))
        .with_context(|| format!("no ziglang wheel in {}", partial.display()))?;
    run(Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(&wheel)
        .arg(&partial))?;
    std::fs::remove_file(&wheel)?;
    make_executable(&partial.join("ziglang/zig"))?;
    complete(&partial, &dir, ZIG_VERSION)?;
    Ok(zig_dir)
}

/// cargo-zigbuild `CARGO_ZIGBUILD_VERSION`, built by `cargo install`.
fn cargo_zigbuild() -> anyhow::Result<PathBuf> {
    let dir = cache_root()
        .join("cargo-zigbuild")
        .join(CARGO_ZIGBUILD_VERSION);
    let binary = dir.join("bin/cargo-zigbuild");
    if dir.join(STAMP).is_file() {
        return Ok(binary);
    }
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    log(&format!(
        "building cargo-zigbuild {CARGO_ZIGBUILD_VERSION} (cargo install)"
    ));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    run(Command::new(cargo)
        .args(["install", "--quiet", "--locked", "cargo-zigbuild"])
        .args(["--version", CARGO_ZIGBUILD_VERSION, "--root"])
        .arg(&partial))?;
    complete(&partial, &dir, CARGO_ZIGBUILD_VERSION)?;
    Ok(binary)
}

fn make_executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_targets_rustup_lacks_are_added() {
        let installed = "x86_64-unknown-linux-gnu\nx86_64-unknown-linux-musl\n";
        let wanted = ["x86_64-unknown-linux-musl", "aarch64-unknown-linux-musl"];
        assert_eq!(
            missing_targets(installed, &wanted),
            ["aarch64-unknown-linux-musl"]
        );
        assert!(missing_targets(installed, &wanted[..1]).is_empty());
    }
}
