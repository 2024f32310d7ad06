//! `cargo xtask image`: an OCI image of each jobrelay binary, built without a
//! container daemon or registry (the way ko and jib do). Each image holds the
//! release binary, the dynamic loader and shared libraries it needs (copied
//! from this host, found with `ldd`) and a few files under /etc; no shell.
//! The same binaries, version, commit and epoch give the same digests.
//!
//! Written under `target/image/` (or `--out`): `<binary>/`, an OCI image
//! layout, with the binary's SBOM as an artifact referring to the image;
//! `<binary>.tar`, that layout as one tarball for `docker load`,
//! `podman load`, `ctr images import` or `kind load image-archive`;
//! `<binary>.cdx.json`, the SBOM; and `images.json`, what was built. See
//! docs/images.md.

mod archive;
pub(crate) mod earlier;
mod oci;
mod rootfs;
mod sbom;
mod source;
mod spec;
#[cfg(test)]
mod tests;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Context;
use jobrelay_testbed::go::controlplane::seconds;
use serde::Serialize;

use crate::log;
use source::{Bill, Source, Workspace, build_release, source_date_epoch};

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
    /// Take jobrelay-manager and jobrelay-agent from this directory instead of
    /// building them (they must link against this host's glibc).
    #[arg(long, env = "JOBRELAY_IMAGE_BINARIES_FROM", value_name = "DIR")]
    pub binaries_from: Option<PathBuf>,
    /// Where to write the layouts, tarballs and images.json [default: target/image].
    #[arg(long, env = "JOBRELAY_IMAGE_OUT", value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The images' tag [default: the workspace version].
    #[arg(long, env = "JOBRELAY_IMAGE_TAG")]
    pub tag: Option<String>,
    /// Build an earlier commit's release instead (its images and its chart),
    /// into the release cache, reusing this tree's dependency build; prints
    /// where. Built once per commit.
    #[arg(long, value_name = "COMMIT", conflicts_with_all = ["binaries_from", "out", "tag"])]
    pub commit: Option<String>,
}

/// One image `build_images` wrote.
#[derive(Clone, Debug, Serialize)]
pub struct BuiltImage {
    /// The binary inside, e.g. `jobrelay-manager`.
    pub binary: String,
    /// e.g. `jobrelay/manager:0.1.0`.
    pub reference: String,
    /// The manifest digest, `sha256:<hex>`.
    pub digest: String,
    /// The OCI layout as one tarball.
    pub tar: PathBuf,
    /// The OCI layout directory.
    pub layout: PathBuf,
    /// The tarball's size in bytes.
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
    for image in &images {
        log(&format!(
            "{}  {}  {:.1} MiB  {}  SBOM: {} crates, {}",
            image.reference,
            image.digest,
            image.size as f64 / (1024.0 * 1024.0),
            image.tar.display(),
            image.components,
            image.sbom.display()
        ));
    }
    log(&format!(
        "{} image(s) in {}",
        images.len(),
        seconds(started.elapsed())
    ));
    println!("{}", serde_json::to_string(&images)?);
    Ok(())
}

/// Builds the release binaries (unless `binaries_from` has them) and writes
/// an image of each; also writes `images.json` listing them.
pub fn build_images(options: &Options) -> anyhow::Result<Vec<BuiltImage>> {
    build_images_from(&Source::checkout(), options)
}

fn build_images_from(source: &Source, options: &Options) -> anyhow::Result<Vec<BuiltImage>> {
    let workspace = Workspace::read(source)?;
    let revision = source.revision.clone();
    let binaries_dir = match &options.binaries_from {
        Some(dir) => dir.clone(),
        None => {
            build_release(source)?;
            workspace.target_dir.join("release")
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
    let bill = Bill::read(source)?;

    let mut built = Vec::new();
    for (binary, repository) in IMAGES {
        let package = workspace.package(binary)?;
        let tag = options.tag.as_deref().unwrap_or(&package.version);
        let binary_path = binaries_dir.join(binary);
        let binary_contents = fs::read(&binary_path)
            .with_context(|| format!("reading the binary {}", binary_path.display()))?;
        let inputs = spec::Inputs {
            binary: binary.to_owned(),
            reference: oci::Reference::new(repository, tag)?,
            platform: rootfs::elf_platform(&binary_path.display().to_string(), &binary_contents)?,
            version: package.version.clone(),
            revision: revision.clone(),
            license: package.license.clone(),
            description: package.description.clone(),
            epoch,
            libraries: host_libraries(&binary_path)?,
            binary_contents,
        };
        let listed = sbom::components(&bill.metadata, binary, &bill.checksums)?;
        let document = sbom::document(&listed, epoch)?;
        let sbom_path = out.join(format!("{binary}.cdx.json"));
        fs::write(&sbom_path, &document)
            .with_context(|| format!("writing {}", sbom_path.display()))?;
        let image =
            oci::assemble(&spec::image_spec(&inputs))?.with_artifact(sbom::MEDIA_TYPE, document)?;
        let mut image = write_image(&out, &inputs, &image)?;
        image.sbom = sbom_path;
        image.components = listed.len().saturating_sub(1);
        built.push(image);
    }

    if source.plugin {
        release_plugin(&binaries_dir, &out)?;
    }
    let listing = out.join("images.json");
    fs::write(&listing, serde_json::to_vec_pretty(&built)?)
        .with_context(|| format!("writing {}", listing.display()))?;
    Ok(built)
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
    inputs: &spec::Inputs,
    image: &oci::Image,
) -> anyhow::Result<BuiltImage> {
    let layout = out.join(&inputs.binary);
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

    let tar = out.join(format!("{}.tar", inputs.binary));
    let bytes = image.layout_tar(inputs.epoch)?;
    // Written aside and renamed, so a reader never sees half a tarball.
    let partial = tar.with_extension("tar.partial");
    fs::write(&partial, &bytes).with_context(|| format!("writing {}", partial.display()))?;
    fs::rename(&partial, &tar).with_context(|| format!("renaming to {}", tar.display()))?;

    Ok(BuiltImage {
        binary: inputs.binary.clone(),
        reference: inputs.reference.familiar(),
        digest: image.digest().to_owned(),
        tar,
        layout,
        size: bytes.len() as u64,
        sbom: PathBuf::new(),
        components: 0,
    })
}

/// The loader and shared libraries `binary` needs, read from this host, by
/// the path `ldd` found them at (which is where they go in the image).
fn host_libraries(binary: &Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .with_context(|| format!("running ldd on {}", binary.display()))?;
    // ldd fails on a static binary, and says so on standard output.
    let text = String::from_utf8_lossy(&output.stdout);
    let libraries = rootfs::libraries_from_ldd(&binary.display().to_string(), &text)?;
    anyhow::ensure!(
        output.status.success() || text.contains("not a dynamic executable"),
        "ldd {} failed ({}): {}",
        binary.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
    libraries
        .into_iter()
        .map(|path| {
            let contents =
                fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            Ok((path.display().to_string(), contents))
        })
        .collect()
}
