//! A release of jobrelay as users install it: its two images and its
//! chart. This tree's, or the one before it — built from a pinned earlier
//! commit by `cargo xtask image --commit`, once, and kept in the cache by
//! its commit like the Go parts — which the upgrade proof installs first.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::helm::chart;
use super::images::{self, Images};
use crate::go::controlplane::{STAMP, cache_root, complete};

/// The commit the previous release is built from: the last commit before
/// the chart took its CRDs from `crds/` into its templates, and a minor
/// version before this tree's.
pub const PREVIOUS: &str = "d5e365ba05ed4d438cbe3a749d4d893db2079f0b";

/// Images and a chart that belong together.
#[derive(Debug, Clone)]
pub struct Release {
    /// How the tests name it: `this tree`, or `<commit> (<version>)`.
    pub name: String,
    pub images: Images,
    /// The chart folder `helm install` takes.
    pub chart: PathBuf,
}

/// This tree's release: [`images::images`] and the chart under test.
pub fn current() -> anyhow::Result<Release> {
    Ok(Release {
        name: "this tree".into(),
        images: images::images()?,
        chart: chart(),
    })
}

/// The previous release, from the cache, built now by `cargo xtask image
/// --commit` if it is not there yet.
pub fn previous() -> anyhow::Result<Release> {
    let dir = match cached(PREVIOUS) {
        Some(dir) => dir,
        None => build(PREVIOUS)?,
    };
    read(&dir, PREVIOUS)
}

/// Where the release of `commit` is kept.
pub fn cache_dir(commit: &str) -> PathBuf {
    cache_root().join("releases").join(commit)
}

/// The release of `commit`, if a whole one is cached.
pub fn cached(commit: &str) -> Option<PathBuf> {
    let dir = cache_dir(commit);
    dir.join(STAMP).is_file().then_some(dir)
}

/// Puts the release built in `partial` (its `images.json`, the tarballs it
/// lists and `chart/`) in the cache for `commit`.
pub fn keep(partial: &Path, commit: &str) -> anyhow::Result<PathBuf> {
    let dir = cache_dir(commit);
    complete(partial, &dir, commit).with_context(|| format!("caching {}", dir.display()))?;
    Ok(dir)
}

fn read(dir: &Path, commit: &str) -> anyhow::Result<Release> {
    let images = images::read(&dir.join("images.json"))?;
    Ok(Release {
        name: format!("{} ({})", &commit[..7], images.manager.tag()),
        images,
        chart: dir.join("chart"),
    })
}

fn build(commit: &str) -> anyhow::Result<PathBuf> {
    images::xtask_image(&["--commit".as_ref(), commit.as_ref()])?;
    cached(commit).with_context(|| format!("no release of {commit} in the cache after its build"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_charts_version_and_app_version_are_the_workspaces() {
        let path = super::chart().join("Chart.yaml");
        let text = std::fs::read_to_string(&path).expect("reading Chart.yaml");
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(|v| v.trim().trim_matches('"').to_string())
        };
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            field("version").as_deref(),
            Some(version),
            "{}",
            path.display()
        );
        assert_eq!(
            field("appVersion").as_deref(),
            Some(version),
            "{}",
            path.display()
        );
    }
}
