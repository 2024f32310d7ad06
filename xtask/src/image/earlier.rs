//! `cargo xtask image --commit`: an earlier commit's release — the images
//! of its binaries for this host's platform, made by this tree's image
//! code, and its chart (not its kubectl plugin) — kept in
//! the release cache by the commit (`jobrelay_testbed::deploy::release`),
//! so the upgrade proof installs it before this tree's. The commit's files
//! are taken from git (`git archive`) and built into this checkout's target
//! folder: the dependencies both trees share are built once. Cargo tells
//! two workspaces' crates apart by name and version only, so the earlier
//! release must have another version than this tree.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use jobrelay_testbed::deploy::platforms::PLATFORMS;
use jobrelay_testbed::deploy::release;
use jobrelay_testbed::go::controlplane::seconds;

use super::source::{Source, Workspace, commit_time, git};
use super::{Options, build_images_from};
use crate::{log, workspace_root};

/// The release of `commit`: the cached one, else built now.
pub fn release(commit: &str) -> anyhow::Result<PathBuf> {
    let root = workspace_root();
    let full = git(
        &root,
        &["rev-parse", "--verify", "--quiet", &format!("{commit}^{{commit}}")],
    )
    .with_context(|| {
        format!(
            "commit {commit} is not in this checkout (shallow: {}); its release is built from it: fetch the history (git fetch --unshallow)",
            git(&root, &["rev-parse", "--is-shallow-repository"]).unwrap_or_default()
        )
    })?;
    if let Some(dir) = release::cached(&full) {
        log(&format!(
            "release of {}: cached, {}",
            &full[..7],
            dir.display()
        ));
        return Ok(dir);
    }
    let started = Instant::now();
    let partial = release::cache_dir(&full).with_extension("partial");
    let _ = fs::remove_dir_all(&partial);
    let tree = partial.join("source");
    fs::create_dir_all(&tree).with_context(|| format!("creating {}", tree.display()))?;
    let archive = std::process::Command::new("git")
        .current_dir(&root)
        .args(["archive", "--format=tar", &full])
        .output()
        .context("running git archive")?;
    anyhow::ensure!(
        archive.status.success(),
        "git archive {full} failed: {}",
        String::from_utf8_lossy(&archive.stderr).trim()
    );
    tar::Archive::new(&archive.stdout[..])
        .unpack(&tree)
        .with_context(|| format!("unpacking {full} into {}", tree.display()))?;

    let this = Source::checkout();
    let ours = Workspace::read(&this)?;
    let source = Source {
        root: tree.clone(),
        revision: full.clone(),
        epoch: commit_time(&root, &full),
        target_dir: Some(ours.target_dir.clone()),
        // The upgrade proof installs the images and the chart only.
        plugin: false,
    };
    let theirs = Workspace::read(&source)?
        .package("jobrelay-manager")?
        .version
        .clone();
    may_share_a_target(&ours.package("jobrelay-manager")?.version, &theirs)
        .map_err(|why| anyhow::anyhow!("{full}: {why}"))?;
    log(&format!(
        "release of {} ({theirs}): building in {}",
        &full[..7],
        tree.display()
    ));
    let options = Options {
        out: Some(partial.clone()),
        // The upgrade proof runs on this host's platform only.
        platforms: vec![PLATFORMS[0].architecture.to_owned()],
        ..Options::default()
    };
    build_images_from(&source, &options)?;
    copy_dir(&tree.join("deploy/helm/jobrelay"), &partial.join("chart"))?;
    fs::remove_dir_all(&tree).with_context(|| format!("removing {}", tree.display()))?;
    let dir = release::keep(&partial, &full)?;
    log(&format!(
        "release of {} ({theirs}) built in {}: {}",
        &full[..7],
        seconds(started.elapsed()),
        dir.display()
    ));
    Ok(dir)
}

/// Whether a tree of version `theirs` may build into the target folder of
/// this tree, of version `ours`: cargo keys a workspace crate's build by
/// its name and version, not its folder, so the same version would make
/// one tree's crates pass for the other's.
fn may_share_a_target(ours: &str, theirs: &str) -> Result<(), String> {
    match ours == theirs {
        true => Err(format!(
            "it has this tree's version ({ours}); built in one target folder, cargo would take one tree's crates for the other's"
        )),
        false => Ok(()),
    }
}

/// Copies the folder `from` (files and folders only) to `to`.
fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::may_share_a_target;

    #[test]
    fn an_earlier_tree_builds_beside_this_one_only_under_another_version() {
        assert_eq!(may_share_a_target("0.2.0", "0.1.0"), Ok(()));
        let refused = may_share_a_target("0.2.0", "0.2.0").expect_err("the same version");
        assert!(refused.contains("0.2.0"), "{refused}");
    }
}
