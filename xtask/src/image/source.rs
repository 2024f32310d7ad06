//! Where images are built from: the tree (this checkout, or an earlier
//! commit's files), what cargo says about it, its release build, and the
//! time and commit the images are stamped with.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use jobrelay_testbed::deploy::platforms::{PLATFORMS, Platform};

use super::toolchain::Toolchain;
use super::{IMAGES, PLUGIN, sbom};
use crate::workspace_root;

/// The sources images are built from: this checkout, or an earlier
/// commit's tree (which builds into this checkout's target folder).
pub(super) struct Source {
    pub(super) root: PathBuf,
    /// The commit, for the images' labels and the binaries' build info.
    pub(super) revision: String,
    /// The commit's time, unless `SOURCE_DATE_EPOCH` says otherwise.
    pub(super) epoch: u64,
    /// Where cargo builds, if not the tree's own target folder.
    pub(super) target_dir: Option<PathBuf>,
    /// Whether the kubectl plugin is built and released beside the images.
    pub(super) plugin: bool,
}

impl Source {
    pub(super) fn checkout() -> Self {
        let root = workspace_root();
        Source {
            revision: git(&root, &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_owned()),
            epoch: commit_time(&root, "HEAD"),
            root,
            target_dir: None,
            plugin: true,
        }
    }

    /// cargo, run in the tree, building into its target folder.
    pub(super) fn cargo(&self) -> Command {
        self.command(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
    }

    /// `program` run in the tree, building into its target folder.
    pub(super) fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        command.current_dir(&self.root);
        if let Some(dir) = &self.target_dir {
            command.env("CARGO_TARGET_DIR", dir);
        }
        command
    }
}

/// Every mtime and the images' `created` time: `SOURCE_DATE_EPOCH` if set,
/// else the time of the source's commit.
pub(super) fn source_date_epoch(commit_time: u64) -> anyhow::Result<u64> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(value) if !value.trim().is_empty() => value.trim().parse().with_context(|| {
            format!("SOURCE_DATE_EPOCH={value:?} is not a whole number of seconds")
        }),
        _ => Ok(commit_time),
    }
}

/// The time of `commit` in the repository at `root`; 0 outside git.
pub(super) fn commit_time(root: &Path, commit: &str) -> u64 {
    git(root, &["log", "-1", "--format=%ct", commit])
        .and_then(|time| time.parse().ok())
        .unwrap_or(0)
}

/// What git prints for `args` in `root`, trimmed; `None` outside git.
pub(super) fn git(root: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .current_dir(root)
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

/// What `cargo metadata` says about the workspace.
pub(super) struct Workspace {
    pub(super) target_dir: PathBuf,
    pub(super) packages: Vec<Package>,
}

#[derive(serde::Deserialize)]
pub(super) struct Package {
    pub(super) name: String,
    pub(super) version: String,
    pub(super) license: Option<String>,
    pub(super) description: Option<String>,
}

/// Builds the images' release binaries for `platforms`, static against
/// musl, and the plugin (if asked) for the first of [`PLATFORMS`],
/// telling them the source revision (`jobrelay_build_info`).
pub(super) fn build_release(source: &Source, platforms: &[Platform]) -> anyhow::Result<()> {
    let targets: Vec<&str> = platforms.iter().map(|p| p.target).collect();
    // The plugin is built for the first platform, whichever the images are.
    let plugin = PLATFORMS[0].target;
    let mut needed = targets.clone();
    if source.plugin && !needed.contains(&plugin) {
        needed.push(plugin);
    }
    let toolchain = Toolchain::ensure(&needed)?;
    let revision = &source.revision;
    let build = |targets: &[&str], binaries: &[&str]| -> anyhow::Result<()> {
        let mut command = toolchain.zigbuild(|program| source.command(program))?;
        command
            .args(["--release", "--locked"])
            .env("JOBRELAY_REVISION", revision);
        for target in targets {
            command.args(["--target", target]);
        }
        for binary in binaries {
            command.args(["-p", binary]);
        }
        crate::log(&format!(
            "cargo zigbuild --release {} for {} (revision {revision})",
            binaries.join(" "),
            targets.join(" ")
        ));
        let status = command.status().context("running cargo zigbuild")?;
        anyhow::ensure!(
            status.success(),
            "cargo zigbuild --release failed ({status})"
        );
        Ok(())
    };
    build(&targets, &IMAGES.map(|(binary, _)| binary))?;
    if source.plugin {
        build(&[plugin], &[PLUGIN])?;
    }
    Ok(())
}

/// What `cargo metadata --format-version 1` with `args` prints, run in
/// the source tree.
pub(super) fn cargo_metadata(source: &Source, args: &[&str]) -> anyhow::Result<Vec<u8>> {
    let output = source
        .cargo()
        .args(["metadata", "--format-version", "1"])
        .args(args)
        .output()
        .context("running cargo metadata")?;
    anyhow::ensure!(
        output.status.success(),
        "cargo metadata failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(output.stdout)
}

/// What a platform's SBOMs are made from: the dependencies resolved for
/// its target, and the checksums `Cargo.lock` records.
pub(super) struct Bill {
    pub(super) metadata: serde_json::Value,
    pub(super) checksums: std::collections::BTreeMap<(String, String), String>,
}

impl Bill {
    pub(super) fn read(source: &Source, target: &str) -> anyhow::Result<Self> {
        let metadata = cargo_metadata(source, &["--locked", "--filter-platform", target])?;
        let lock =
            fs::read_to_string(source.root.join("Cargo.lock")).context("reading Cargo.lock")?;
        Ok(Bill {
            metadata: serde_json::from_slice(&metadata).context("reading cargo metadata")?,
            checksums: sbom::lock_checksums(&lock),
        })
    }
}

impl Workspace {
    pub(super) fn read(source: &Source) -> anyhow::Result<Self> {
        #[derive(serde::Deserialize)]
        struct Metadata {
            target_directory: PathBuf,
            packages: Vec<Package>,
        }
        let metadata = cargo_metadata(source, &["--no-deps"])?;
        let metadata: Metadata =
            serde_json::from_slice(&metadata).context("reading cargo metadata's output")?;
        Ok(Workspace {
            target_dir: metadata.target_directory,
            packages: metadata.packages,
        })
    }

    pub(super) fn package(&self, name: &str) -> anyhow::Result<&Package> {
        self.packages
            .iter()
            .find(|package| package.name == name)
            .with_context(|| format!("the workspace has no package {name}"))
    }
}
