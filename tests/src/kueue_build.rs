//! Kueue for the tests and the demo: the pinned release (in
//! `tests/controlplane/kueue/go.mod`) built from its module into a cache
//! folder of its own, with the release's CRDs and webhook configurations
//! copied beside the binary. Moving Kueue never rebuilds Kubernetes, and the
//! other way round.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::controlplane::{
    Error, STAMP, cache_root, digest, go_build_args, go_command, run, seconds, source_dir,
};

/// The Kueue release the Kueue tests and the demo run on the manager cluster.
pub const KUEUE_VERSION: &str = "v0.19.2";

/// A built Kueue: its binary and the manifests of the same release that
/// install it (CRDs, webhook configurations).
#[derive(Debug, Clone)]
pub struct KueueRelease {
    dir: PathBuf,
}

impl KueueRelease {
    /// The `kueue` controller binary.
    pub fn binary(&self) -> PathBuf {
        self.dir.join("bin").join("kueue")
    }

    /// The folder of its CRDs (`config/components/crd/bases`).
    pub fn crds(&self) -> PathBuf {
        self.dir.join("crd")
    }

    /// Its webhook configurations (`config/components/webhook/manifests.yaml`).
    pub fn webhooks(&self) -> PathBuf {
        self.dir.join("webhooks.yaml")
    }
}

/// The cached Kueue of the current pin, if it was built before.
pub fn kueue() -> Result<KueueRelease, Error> {
    let dir = kueue_dir()?;
    if dir.join(STAMP).is_file() {
        Ok(KueueRelease { dir })
    } else {
        Err(Error::KueueNotBuilt(dir))
    }
}

/// Returns the cached Kueue, building it first when it is missing.
pub fn ensure_kueue_built(log: &mut dyn FnMut(&str)) -> Result<KueueRelease, Error> {
    if let Ok(kueue) = kueue() {
        log(&format!(
            "Kueue {KUEUE_VERSION} cached in {}",
            kueue.dir.display()
        ));
        return Ok(kueue);
    }
    build_kueue(log)
}

fn kueue_dir() -> Result<PathBuf, Error> {
    let key = format!(
        "{KUEUE_VERSION}-{}",
        digest(&["kueue/go.mod", "kueue/go.sum"])?
    );
    Ok(cache_root().join("kueue").join(key))
}

/// Builds `cmd/kueue` from the pinned module and copies the release's CRDs
/// and webhook configurations from the module's tree beside it.
fn build_kueue(log: &mut dyn FnMut(&str)) -> Result<KueueRelease, Error> {
    let dir = kueue_dir()?;
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    let bin = partial.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| Error::Io(bin.display().to_string(), e))?;
    let src = source_dir().join("kueue");
    let args = go_build_args(
        &format!("{}/", bin.display()),
        &format!("-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION}"),
        &["sigs.k8s.io/kueue/cmd/kueue"],
    );
    log(&format!("building Kueue (go {})", args.join(" ")));
    let started = Instant::now();
    run(go_command(&src).args(&args))?;
    log(&format!("built Kueue in {}", seconds(started.elapsed())));

    let module = cache_root()
        .join("go")
        .join("mod")
        .join(format!("sigs.k8s.io/kueue@{KUEUE_VERSION}"))
        .join("config")
        .join("components");
    let crds = partial.join("crd");
    std::fs::create_dir_all(&crds).map_err(|e| Error::Io(crds.display().to_string(), e))?;
    let bases = module.join("crd").join("bases");
    let entries =
        std::fs::read_dir(&bases).map_err(|e| Error::Io(bases.display().to_string(), e))?;
    for entry in entries.flatten() {
        copy(&entry.path(), &crds.join(entry.file_name()))?;
    }
    copy(
        &module.join("webhook").join("manifests.yaml"),
        &partial.join("webhooks.yaml"),
    )?;
    std::fs::write(partial.join(STAMP), KUEUE_VERSION)
        .map_err(|e| Error::Io("writing stamp".into(), e))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&partial, &dir).map_err(|e| Error::Io(dir.display().to_string(), e))?;
    log(&format!(
        "Kueue {KUEUE_VERSION} cached in {}",
        dir.display()
    ));
    Ok(KueueRelease { dir })
}

fn copy(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| Error::Io(format!("copying {} to {}", from.display(), to.display()), e))
}
