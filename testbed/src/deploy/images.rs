//! jobrelay's own images, as `cargo xtask image` builds them: what a test
//! that installs the chart loads onto its real nodes. `cargo xtask test`
//! builds them once and names its `images.json` in `JOBRELAY_IMAGES`; a test
//! run on its own builds them itself.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use serde::Deserialize;

/// One image: the binary it runs, its reference and its archive.
#[derive(Debug, Clone, Deserialize)]
pub struct Image {
    pub binary: String,
    /// e.g. `jobrelay/manager:0.1.0`
    pub reference: String,
    /// The image index's digest, `sha256:<hex>`.
    pub digest: String,
    /// The OCI archive `ctr images import` loads.
    pub tar: PathBuf,
}

impl Image {
    /// The reference's repository, e.g. `jobrelay/manager`.
    pub fn repository(&self) -> &str {
        self.reference
            .rsplit_once(':')
            .map_or(self.reference.as_str(), |(repository, _)| repository)
    }

    /// The reference's tag, e.g. `0.1.0`.
    pub fn tag(&self) -> &str {
        self.reference
            .rsplit_once(':')
            .map_or("latest", |(_, tag)| tag)
    }
}

/// The manager's and the agent's images.
#[derive(Debug, Clone)]
pub struct Images {
    pub manager: Image,
    pub agent: Image,
}

/// The images named by `JOBRELAY_IMAGES`, else built now by `cargo xtask
/// image` (a release build).
pub fn images() -> anyhow::Result<Images> {
    let listed = match std::env::var_os("JOBRELAY_IMAGES") {
        Some(path) => PathBuf::from(path),
        None => build()?,
    };
    read(&listed)
}

fn build() -> anyhow::Result<PathBuf> {
    // The place `cargo xtask test` builds them too: one copy, overwritten.
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/image");
    xtask_image(&["--out".as_ref(), out.as_os_str()])?;
    Ok(out.join("images.json"))
}

/// Runs `cargo xtask image` with `args` from the workspace's root (its
/// standard output, the listing, not kept); fails unless it succeeds.
pub(crate) fn xtask_image(args: &[&std::ffi::OsStr]) -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&root)
        .args(["run", "-q", "-p", "xtask", "--", "image"])
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()
        .context("running cargo xtask image")?;
    anyhow::ensure!(
        status.success(),
        "cargo xtask image {} failed ({status})",
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(())
}

/// The images an `images.json` lists; their tarballs are found beside it
/// (where `cargo xtask image` writes them), so a listing moved with its
/// tarballs still reads.
pub fn read(listed: &Path) -> anyhow::Result<Images> {
    let text =
        std::fs::read_to_string(listed).with_context(|| format!("reading {}", listed.display()))?;
    let mut all: Vec<Image> =
        serde_json::from_str(&text).with_context(|| format!("reading {}", listed.display()))?;
    let dir = listed.parent().unwrap_or(Path::new("."));
    for image in &mut all {
        if let Some(name) = image.tar.file_name() {
            image.tar = dir.join(name);
        }
    }
    let find = |binary: &str| {
        all.iter()
            .find(|image| image.binary == binary)
            .cloned()
            .with_context(|| format!("{} lists no image of {binary}", listed.display()))
    };
    Ok(Images {
        manager: find("jobrelay-manager")?,
        agent: find("jobrelay-agent")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_splits_into_repository_and_tag() {
        let image = Image {
            binary: "jobrelay-agent".into(),
            reference: "jobrelay/agent:0.1.0".into(),
            digest: String::new(),
            tar: PathBuf::new(),
        };
        assert_eq!(image.repository(), "jobrelay/agent");
        assert_eq!(image.tag(), "0.1.0");
    }
}
