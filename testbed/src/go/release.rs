//! The Go controllers the tests run beside Kubernetes (Kueue, JobSet,
//! cert-manager): each
//! a pinned release (a wrapper module in `tests/controlplane/<folder>/go.mod`
//! with its `go.sum`) built into a cache folder of its own, with the
//! release's CRDs and webhook configurations copied beside the binary.
//! The cache key is the version and a digest of the wrapper's `go.mod`,
//! `go.sum` and the Go version, so moving one release never rebuilds
//! Kubernetes or another release. [`manifests`](crate::controllers::manifests)
//! installs what is copied on a test cluster.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::go::controlplane::{
    Error, STAMP, cache_root, complete, digest, go_build_args, go_command, run, seconds, source_dir,
};

/// One pinned release of a Go controller and how its binary is built.
#[derive(Debug, Clone, Copy)]
pub struct GoRelease {
    /// How logs name it, e.g. `Kueue`.
    pub name: &'static str,
    /// Its wrapper module's folder under `tests/controlplane`, and its
    /// folder under the cache root.
    pub folder: &'static str,
    /// The release tag, as the wrapper's `go.mod` requires it.
    pub version: &'static str,
    /// The Go module of the release, e.g. `sigs.k8s.io/kueue`.
    pub module: &'static str,
    /// The main package built; Go names the binary for its last element.
    pub package: &'static str,
    /// The string variable the release reports its version from, set to
    /// [`GoRelease::version`] at link time.
    pub version_variable: &'static str,
    /// The folder of the module's CRDs (its `.yaml` files are copied).
    pub crds: &'static str,
    /// The module's webhook configurations, if the tests register them.
    pub webhooks: Option<&'static str>,
}

/// Where the kubebuilder layout keeps CRDs and webhook configurations.
pub const KUBEBUILDER_CRDS: &str = "config/components/crd/bases";
pub const KUBEBUILDER_WEBHOOKS: &str = "config/components/webhook/manifests.yaml";

/// A built release: its binary and the manifests of the same release that
/// install it (CRDs, webhook configurations).
#[derive(Debug, Clone)]
pub struct BuiltRelease {
    dir: PathBuf,
    binary: &'static str,
}

impl BuiltRelease {
    /// The controller binary.
    pub fn binary(&self) -> PathBuf {
        self.dir.join("bin").join(self.binary)
    }

    /// The folder of its CRDs.
    pub fn crds(&self) -> PathBuf {
        self.dir.join("crd")
    }

    /// Its webhook configurations, where the release has them.
    pub fn webhooks(&self) -> PathBuf {
        self.dir.join("webhooks.yaml")
    }
}

impl GoRelease {
    /// The cache folder of this pin, built or not.
    pub fn dir(&self) -> Result<PathBuf, Error> {
        let go_mod = format!("{}/go.mod", self.folder);
        let go_sum = format!("{}/go.sum", self.folder);
        let key = format!(
            "{}-{}",
            self.version,
            digest(&[go_mod.as_str(), go_sum.as_str()])?
        );
        Ok(cache_root().join(self.folder).join(key))
    }

    /// The cached build of this pin, if it was built before.
    pub fn cached(&self) -> Result<Option<BuiltRelease>, Error> {
        let dir = self.dir()?;
        Ok(dir.join(STAMP).is_file().then(|| self.at(dir)))
    }

    /// Returns the cached build, building it first when it is missing. One
    /// build at a time in a process: tests that start together wait for the
    /// first one's build rather than racing it into the same folder.
    pub fn ensure_built(&self, log: &mut dyn FnMut(&str)) -> Result<BuiltRelease, Error> {
        static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one_at_a_time = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(release) = self.cached()? {
            log(&format!(
                "{} {} cached in {}",
                self.name,
                self.version,
                release.dir.display()
            ));
            return Ok(release);
        }
        self.build(log)
    }

    fn at(&self, dir: PathBuf) -> BuiltRelease {
        let binary = self.package.rsplit('/').next().unwrap_or(self.package);
        BuiltRelease { dir, binary }
    }

    /// Builds the main package from the pinned module into a `.partial`
    /// folder, copies the release's CRDs and webhook configurations from the
    /// module's tree beside it, and renames the folder into place only once
    /// it is complete.
    fn build(&self, log: &mut dyn FnMut(&str)) -> Result<BuiltRelease, Error> {
        let dir = self.dir()?;
        let partial = dir.with_extension("partial");
        let _ = std::fs::remove_dir_all(&partial);
        let bin = partial.join("bin");
        std::fs::create_dir_all(&bin).map_err(|e| Error::Io(bin.display().to_string(), e))?;
        let src = source_dir().join(self.folder);
        let args = go_build_args(
            &format!("{}/", bin.display()),
            &format!("-s -w -X {}={}", self.version_variable, self.version),
            &[self.package],
        );
        log(&format!("building {} (go {})", self.name, args.join(" ")));
        let started = Instant::now();
        run(go_command(&src).args(&args))?;
        log(&format!(
            "built {} in {}",
            self.name,
            seconds(started.elapsed())
        ));

        let module = cache_root()
            .join("go")
            .join("mod")
            .join(format!("{}@{}", self.module, self.version));
        let crds = partial.join("crd");
        std::fs::create_dir_all(&crds).map_err(|e| Error::Io(crds.display().to_string(), e))?;
        let bases = module.join(self.crds);
        let entries =
            std::fs::read_dir(&bases).map_err(|e| Error::Io(bases.display().to_string(), e))?;
        for entry in entries.flatten() {
            if entry.path().extension().is_some_and(|e| e == "yaml") {
                copy(&entry.path(), &crds.join(entry.file_name()))?;
            }
        }
        if let Some(webhooks) = self.webhooks {
            copy(&module.join(webhooks), &partial.join("webhooks.yaml"))?;
        }
        complete(&partial, &dir, self.version)?;
        log(&format!(
            "{} {} cached in {}",
            self.name,
            self.version,
            dir.display()
        ));
        Ok(self.at(dir))
    }
}

fn copy(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| Error::Io(format!("copying {} to {}", from.display(), to.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_is_named_for_the_last_element_of_the_package() {
        let release = |package| GoRelease {
            name: "X",
            folder: "x",
            version: "v1",
            module: "example.com/x",
            package,
            version_variable: "example.com/x/version.V",
            crds: KUBEBUILDER_CRDS,
            webhooks: None,
        };
        let built = release("example.com/x/cmd/xd").at(PathBuf::from("/c"));
        assert_eq!(built.binary(), Path::new("/c/bin/xd"));
        let built = release("example.com/x").at(PathBuf::from("/c"));
        assert_eq!(built.binary(), Path::new("/c/bin/x"));
    }
}
