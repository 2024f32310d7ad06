//! JobSet for the tests: the pinned release (in
//! `tests/controlplane/jobset/go.mod`) built from its module into a cache
//! folder of its own, with the release's CRD and webhook configurations
//! copied beside the binary. Moving JobSet never rebuilds Kubernetes or
//! Kueue, and the other way round.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::controlplane::{
    Error, STAMP, cache_root, digest, go_build_args, go_command, run, seconds, source_dir,
};

/// The JobSet release the JobSet tests run.
pub const JOBSET_VERSION: &str = "v0.11.1";

/// A built JobSet: its binary and the manifests of the same release that
/// install it (CRD, webhook configurations).
#[derive(Debug, Clone)]
pub struct JobSetRelease {
    dir: PathBuf,
}

impl JobSetRelease {
    /// The JobSet controller binary (the module's root package).
    pub fn binary(&self) -> PathBuf {
        self.dir.join("bin").join("jobset")
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

/// The cached JobSet of the current pin, if it was built before.
pub fn jobset() -> Result<Option<JobSetRelease>, Error> {
    let dir = jobset_dir()?;
    Ok(dir.join(STAMP).is_file().then_some(JobSetRelease { dir }))
}

/// Returns the cached JobSet, building it first when it is missing.
pub fn ensure_jobset_built(log: &mut dyn FnMut(&str)) -> Result<JobSetRelease, Error> {
    if let Some(jobset) = jobset()? {
        log(&format!(
            "JobSet {JOBSET_VERSION} cached in {}",
            jobset.dir.display()
        ));
        return Ok(jobset);
    }
    build_jobset(log)
}

fn jobset_dir() -> Result<PathBuf, Error> {
    let key = format!(
        "{JOBSET_VERSION}-{}",
        digest(&["jobset/go.mod", "jobset/go.sum"])?
    );
    Ok(cache_root().join("jobset").join(key))
}

/// Builds the module's root package (JobSet's `main`) from the pinned
/// module and copies the release's CRDs and webhook configurations from the
/// module's tree beside it.
fn build_jobset(log: &mut dyn FnMut(&str)) -> Result<JobSetRelease, Error> {
    let dir = jobset_dir()?;
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    let bin = partial.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| Error::Io(bin.display().to_string(), e))?;
    let src = source_dir().join("jobset");
    let args = go_build_args(
        &format!("{}/", bin.display()),
        &format!("-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion={JOBSET_VERSION}"),
        &["sigs.k8s.io/jobset"],
    );
    log(&format!("building JobSet (go {})", args.join(" ")));
    let started = Instant::now();
    run(go_command(&src).args(&args))?;
    log(&format!("built JobSet in {}", seconds(started.elapsed())));

    let module = cache_root()
        .join("go")
        .join("mod")
        .join(format!("sigs.k8s.io/jobset@{JOBSET_VERSION}"))
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
    std::fs::write(partial.join(STAMP), JOBSET_VERSION)
        .map_err(|e| Error::Io("writing stamp".into(), e))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&partial, &dir).map_err(|e| Error::Io(dir.display().to_string(), e))?;
    log(&format!(
        "JobSet {JOBSET_VERSION} cached in {}",
        dir.display()
    ));
    Ok(JobSetRelease { dir })
}

fn copy(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| Error::Io(format!("copying {} to {}", from.display(), to.display()), e))
}
