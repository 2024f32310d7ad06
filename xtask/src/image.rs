//! `cargo xtask image`: an OCI image of each jobrelay binary, built without a
//! container daemon or registry (the way ko and jib do), for amd64 and
//! arm64 under one image index. Each platform's image holds the static
//! (musl) release binary and two files under /etc; no loader, no libraries,
//! no shell. The same binaries, version, commit and epoch give the same
//! digests.
//!
//! Written under `target/image/` (or `--out`): `<binary>/`, an OCI image
//! layout, with each platform's SBOM as an artifact referring to that
//! platform's manifest; `<binary>.tar`, that layout as one tarball for
//! `docker load`, `podman load`, `ctr images import` or `kind load
//! image-archive`; `<binary>.<arch>.cdx.json`, the SBOMs; and
//! `images.json`, what was built. See docs/images.md.

mod archive;
pub(crate) mod earlier;
mod oci;
mod platform;
mod rootfs;
mod sbom;
mod source;
mod spec;
#[cfg(test)]
mod tests;
mod toolchain;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use jobrelay_testbed::deploy::platforms::{PLATFORMS, Platform};
use jobrelay_testbed::go::controlplane::seconds;
use serde::Serialize;

use crate::log;
use source::{Bill, Package, Source, Workspace, build_release, source_date_epoch};

/// The binaries with an image, and the repository each image is named in.
const IMAGES: [(&str, &str); 2] = [
    ("jobrelay-manager", "jobrelay/manager"),
    ("jobrelay-agent", "jobrelay/agent"),
];

/// The kubectl plugin, released beside the images as a binary of its own
/// (`<out>/kubectl-jobrelay`, for the users' machines, not for a cluster).
const PLUGIN: &str = "kubectl-jobrelay";

/// How `cargo xtask image` is asked to build.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Options {
    /// Take jobrelay-manager and jobrelay-agent from this target folder
    /// (`DIR/<target>/release/`, static) instead of building them.
    #[arg(long, env = "JOBRELAY_IMAGE_BINARIES_FROM", value_name = "DIR")]
    pub binaries_from: Option<PathBuf>,
    /// The platforms to build for, by OCI architecture [default: amd64,arm64].
    #[arg(
        long = "platform",
        env = "JOBRELAY_IMAGE_PLATFORMS",
        value_delimiter = ',',
        value_name = "ARCH"
    )]
    pub platforms: Vec<String>,
    /// Where to write the layouts, tarballs and images.json [default: target/image].
    #[arg(long, env = "JOBRELAY_IMAGE_OUT", value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The images' tag [default: the workspace version].
    #[arg(long, env = "JOBRELAY_IMAGE_TAG")]
    pub tag: Option<String>,
    /// Build an earlier commit's release instead (its images and its chart),
    /// into the release cache, reusing this tree's dependency build; prints
    /// where. Built once per commit.
    #[arg(long, value_name = "COMMIT", conflicts_with_all = ["binaries_from", "out", "tag", "platforms"])]
    pub commit: Option<String>,
}

/// One image `build_images` wrote.
#[derive(Clone, Debug, Serialize)]
pub struct BuiltImage {
    /// The binary inside, e.g. `jobrelay-manager`.
    pub binary: String,
    /// e.g. `jobrelay/manager:0.1.0`.
    pub reference: String,
    /// The image index's digest, `sha256:<hex>`: the image on every
    /// platform.
    pub digest: String,
    /// The OCI layout as one tarball.
    pub tar: PathBuf,
    /// The OCI layout directory.
    pub layout: PathBuf,
    /// The tarball's size in bytes.
    pub size: u64,
    /// Each platform's image, in the index's order.
    pub platforms: Vec<BuiltPlatform>,
}

/// One platform's image within a [`BuiltImage`].
#[derive(Clone, Debug, Serialize)]
pub struct BuiltPlatform {
    /// OCI's name for it: `amd64`, `arm64`.
    pub architecture: String,
    /// The platform's manifest digest.
    pub digest: String,
    /// Its layers' size in bytes (the binary, mostly).
    pub size: u64,
    /// The binary's SBOM (CycloneDX JSON), also an artifact in the layout.
    pub sbom: PathBuf,
    /// The crates it lists besides the binary's own.
    pub components: usize,
}

/// `cargo xtask image`: builds the images, says what they are on standard
/// error, and prints them as one JSON line on standard output.
pub fn run(options: Options) -> anyhow::Result<()> {
    if let Some(commit) = &options.commit {
        let dir = earlier::release(commit)?;
        println!("{}", dir.display());
        return Ok(());
    }
    let started = Instant::now();
    let images = build_images(&options)?;
    log(&format!(
        "{} image(s) in {}",
        images.len(),
        seconds(started.elapsed())
    ));
    println!("{}", serde_json::to_string(&images)?);
    Ok(())
}

/// Builds the release binaries (unless `binaries_from` has them) and writes
/// an image of each; also writes `images.json` listing them, and says
/// what they are on standard error.
pub fn build_images(options: &Options) -> anyhow::Result<Vec<BuiltImage>> {
    let images = build_images_from(&Source::checkout(), options)?;
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    for image in &images {
        log(&format!(
            "{}  {}  {:.1} MiB  {}",
            image.reference,
            image.digest,
            mib(image.size),
            image.tar.display(),
        ));
        for platform in &image.platforms {
            log(&format!(
                "  linux/{}  {}  {:.1} MiB  SBOM: {} crates, {}",
                platform.architecture,
                platform.digest,
                mib(platform.size),
                platform.components,
                platform.sbom.display()
            ));
        }
    }
    Ok(images)
}

fn build_images_from(source: &Source, options: &Options) -> anyhow::Result<Vec<BuiltImage>> {
    let platforms = platform::chosen(&options.platforms)?;
    let workspace = Workspace::read(source)?;
    let binaries_dir = match &options.binaries_from {
        Some(dir) => dir.clone(),
        None => {
            build_release(source, &platforms)?;
            workspace.target_dir.clone()
        }
    };
    let out = std::path::absolute(
        options
            .out
            .clone()
            .unwrap_or_else(|| workspace.target_dir.join("image")),
    )?;
    fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let epoch = source_date_epoch(source.epoch)?;
    let bills = platforms
        .iter()
        .map(|platform| Bill::read(source, platform.target))
        .collect::<anyhow::Result<Vec<_>>>()?;

    let build = Build {
        source,
        binaries: binaries_dir,
        out,
        epoch,
    };
    let mut built = Vec::new();
    for (binary, repository) in IMAGES {
        let package = workspace.package(binary)?;
        let tag = options.tag.as_deref().unwrap_or(&package.version);
        let reference = oci::Reference::new(repository, tag)?;
        let mut manifests = Vec::new();
        let mut listed = Vec::new();
        let mut sboms = Vec::new();
        for (platform, bill) in platforms.iter().zip(&bills) {
            let (manifest, entry, document) = build.platform(package, platform, bill)?;
            sboms.push((manifest.digest().to_owned(), document));
            manifests.push(manifest);
            listed.push(entry);
        }
        let mut image = oci::index(&reference, manifests)?;
        for (subject, document) in sboms {
            image = image.with_artifact(&subject, sbom::MEDIA_TYPE, document)?;
        }
        let mut written = write_image(&build.out, binary, &reference, epoch, &image)?;
        written.platforms = listed;
        built.push(written);
    }

    if source.plugin {
        release_plugin(&build.release_dir(&PLATFORMS[0]), &build.out)?;
    }
    let listing = build.out.join("images.json");
    fs::write(&listing, serde_json::to_vec_pretty(&built)?)
        .with_context(|| format!("writing {}", listing.display()))?;
    Ok(built)
}

/// What the images of one build share.
struct Build<'a> {
    source: &'a Source,
    /// The target folder holding `<target>/release/<binary>`.
    binaries: PathBuf,
    out: PathBuf,
    epoch: u64,
}

impl Build<'_> {
    /// Where cargo put `platform`'s release binaries.
    fn release_dir(&self, platform: &Platform) -> PathBuf {
        self.binaries.join(platform.target).join("release")
    }

    /// `package`'s image for `platform`: its manifest, what `images.json`
    /// says of it, and its SBOM (also written beside the tarball).
    fn platform(
        &self,
        package: &Package,
        platform: &Platform,
        bill: &Bill,
    ) -> anyhow::Result<(oci::Manifest, BuiltPlatform, Vec<u8>)> {
        let binary = package.name.as_str();
        let path = self.release_dir(platform).join(binary);
        let inputs = spec::Inputs {
            binary: binary.to_owned(),
            platform: oci::Platform {
                architecture: platform.architecture.to_owned(),
                os: "linux".to_owned(),
            },
            version: package.version.clone(),
            revision: self.source.revision.clone(),
            license: package.license.clone(),
            description: package.description.clone(),
            epoch: self.epoch,
            binary_contents: platform::static_binary(&path, platform)?,
        };
        let manifest = oci::assemble(&spec::image_spec(&inputs))?;
        let listed = sbom::components(&bill.metadata, binary, &bill.checksums)?;
        let document = sbom::document(&listed, self.epoch)?;
        let sbom = self
            .out
            .join(format!("{binary}.{}.cdx.json", platform.architecture));
        fs::write(&sbom, &document).with_context(|| format!("writing {}", sbom.display()))?;
        let entry = BuiltPlatform {
            architecture: platform.architecture.to_owned(),
            digest: manifest.digest().to_owned(),
            size: manifest.layers.iter().map(|l| l.bytes.len() as u64).sum(),
            sbom,
            components: listed.len().saturating_sub(1),
        };
        Ok((manifest, entry, document))
    }
}

/// Copies the plugin from `binaries` to `out`, with its SHA-256 beside it
/// (`sha256sum -c` reads it); says so when `binaries` has none (binaries
/// taken from elsewhere may hold only the images').
fn release_plugin(binaries: &Path, out: &Path) -> anyhow::Result<()> {
    use sha2::Digest;
    let built = binaries.join(PLUGIN);
    let Ok(contents) = fs::read(&built) else {
        log(&format!(
            "no {PLUGIN} in {}; not released",
            binaries.display()
        ));
        return Ok(());
    };
    let released = out.join(PLUGIN);
    fs::write(&released, &contents).with_context(|| format!("writing {}", released.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&released, fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {} executable", released.display()))?;
    }
    let digest: String = sha2::Sha256::digest(&contents)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let sum = out.join(format!("{PLUGIN}.sha256"));
    fs::write(&sum, format!("{digest}  {PLUGIN}\n"))
        .with_context(|| format!("writing {}", sum.display()))?;
    log(&format!(
        "{PLUGIN}  {:.1} MiB  {}",
        contents.len() as f64 / (1024.0 * 1024.0),
        released.display()
    ));
    Ok(())
}

/// Writes `image` as a layout directory and a tarball under `out`.
fn write_image(
    out: &Path,
    binary: &str,
    reference: &oci::Reference,
    epoch: u64,
    image: &oci::Image,
) -> anyhow::Result<BuiltImage> {
    let layout = out.join(binary);
    if layout.exists() {
        fs::remove_dir_all(&layout)
            .with_context(|| format!("removing the old layout {}", layout.display()))?;
    }
    for file in image.layout_files() {
        let path = layout.join(&file.path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::write(&path, &file.contents).with_context(|| format!("writing {}", path.display()))?;
    }

    let tar = out.join(format!("{binary}.tar"));
    let bytes = image.layout_tar(epoch)?;
    // Written aside and renamed, so a reader never sees half a tarball.
    let partial = tar.with_extension("tar.partial");
    fs::write(&partial, &bytes).with_context(|| format!("writing {}", partial.display()))?;
    fs::rename(&partial, &tar).with_context(|| format!("renaming to {}", tar.display()))?;

    Ok(BuiltImage {
        binary: binary.to_owned(),
        reference: reference.familiar(),
        digest: image.digest().to_owned(),
        tar,
        layout,
        size: bytes.len() as u64,
        platforms: Vec::new(),
    })
}
