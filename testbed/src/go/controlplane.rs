//! The upstream Kubernetes binaries the test clusters run, and the helm that
//! renders the chart: which versions are pinned, where they are cached, and
//! how they are built from Go modules.
//!
//! The pins live in `tests/controlplane/go.mod` (Kubernetes and etcd),
//! `tests/controlplane/kwok/go.mod` (kwok) and `tests/controlplane/helm/go.mod`
//! (helm), with their `go.sum`; helm and Kueue are built by `helm_build` and
//! `kueue_build` with the same Go settings.
//! The control plane's cache key is a digest of its files, the etcd main and
//! the Go version, so changing a pin builds anew and everything else reuses
//! what is there. helm and Kueue have a cache folder and a key of their own:
//! moving either never rebuilds Kubernetes, and the other way round.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// The Kubernetes release the test clusters run.
pub const KUBERNETES_VERSION: &str = "v1.34.4";
/// The etcd server version that Kubernetes release is tested with.
pub const ETCD_VERSION: &str = "v3.6.4";
/// The kwok release that plays kubelet.
pub const KWOK_VERSION: &str = "v0.8.0";
/// The helm release that lints and renders the chart: the newest v3 built on
/// the same Kubernetes libraries (0.34) as the clusters the tests run.
pub const HELM_VERSION: &str = "v3.19.5";
/// The Kueue release the Kueue tests and the demo run on the manager cluster
/// (built by `kueue_build`).
pub const KUEUE_VERSION: &str = "v0.19.2";

/// Every binary a cluster needs, by file name.
pub const BINARIES: [&str; 6] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
];

const KUBERNETES_COMMANDS: [&str; 4] = [
    "k8s.io/kubernetes/cmd/kube-apiserver",
    "k8s.io/kubernetes/cmd/kube-controller-manager",
    "k8s.io/kubernetes/cmd/kube-scheduler",
    "k8s.io/kubernetes/cmd/kubectl",
];

/// Written last into a cache folder; a folder without it is incomplete.
pub const STAMP: &str = "complete";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    #[error("`{command}` failed ({status}); its output ends with:\n{tail}")]
    Command {
        command: String,
        status: String,
        tail: String,
    },
    #[error(
        "the Kubernetes control plane {KUBERNETES_VERSION} is not built yet (looked in {0}); run `cargo xtask k8s`"
    )]
    NotBuilt(PathBuf),
    #[error("helm {HELM_VERSION} is not built yet (looked in {0}); run `cargo xtask k8s`")]
    HelmNotBuilt(PathBuf),
    #[error(
        "the real-node runtime (kubelet, containerd, runc, CNI plugins, images) is not built yet (looked in {0}); run `cargo xtask k8s`"
    )]
    NodeRuntimeNotBuilt(PathBuf),
    #[error("Kueue {version} is not built yet (looked in {0}); run `cargo xtask k8s`", version = KUEUE_VERSION)]
    KueueNotBuilt(PathBuf),
    #[error(transparent)]
    Image(#[from] crate::go::oci_image::Error),
    #[error("{binary} reports version {found:?}, expected it to mention {expected}")]
    WrongVersion {
        binary: String,
        found: String,
        expected: String,
    },
}

/// The folder of built binaries for the current pins.
#[derive(Debug, Clone)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// The path of one binary, e.g. `kube-apiserver`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The folder holding every binary.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The Go modules (`go.mod`, `go.sum`) that pin the control plane:
/// `tests/controlplane`, beside the scenarios whose README describes them.
/// Named without `..`, so Go sees the same folder whoever asks.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the test bed sits in the workspace")
        .join("tests")
        .join("controlplane")
}

/// The project's cache, outside the repository: `$JOBRELAY_CACHE`, else
/// `$XDG_CACHE_HOME/jobrelay`, else `~/.cache/jobrelay`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("JOBRELAY_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("jobrelay");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    PathBuf::from(home).join(".cache").join("jobrelay")
}

/// The binaries of the current pins, if they were built before.
pub fn cached() -> Result<Binaries, Error> {
    let dir = binary_dir()?;
    if dir.join(STAMP).is_file() {
        Ok(Binaries { dir })
    } else {
        Err(Error::NotBuilt(dir))
    }
}

/// Removes Go's build cache (compiled packages, several GiB) once every Go
/// part is built and cached by version: it only speeds up a rebuild after a
/// version changes, and the disk it holds is what the Rust build needs.
/// The module cache (sources) stays, so a rebuild needs no download.
pub fn trim_go_build_cache(log: &mut dyn FnMut(&str)) -> Result<(), Error> {
    let dir = cache_root().join("go").join("build");
    if !dir.exists() {
        return Ok(());
    }
    // Go writes its cache read-only; `go clean -cache` removes it properly.
    run(go_command(&source_dir()).args(["clean", "-cache"]))?;
    log(&format!("removed Go's build cache {}", dir.display()));
    Ok(())
}

fn binary_dir() -> Result<PathBuf, Error> {
    Ok(cache_root().join("k8s").join(cache_key()?).join("bin"))
}

fn cache_key() -> Result<String, Error> {
    let hex = digest(&[
        "go.mod",
        "go.sum",
        "kwok/go.mod",
        "kwok/go.sum",
        "etcd/main.go",
    ])?;
    Ok(format!(
        "{KUBERNETES_VERSION}-etcd{ETCD_VERSION}-kwok{KWOK_VERSION}-{hex}"
    ))
}

/// A short digest of `files` (under [`source_dir`]) and the Go version.
pub(crate) fn digest(files: &[&str]) -> Result<String, Error> {
    let src = source_dir();
    let mut digest = Sha256::new();
    for file in files {
        let path = src.join(file);
        let bytes = std::fs::read(&path).map_err(|e| Error::Io(path.display().to_string(), e))?;
        digest.update(file.as_bytes());
        digest.update(&bytes);
    }
    digest.update(go_version()?.as_bytes());
    Ok(digest
        .finalize()
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect())
}

fn go_version() -> Result<String, Error> {
    let out = go_command(&source_dir())
        .args(["env", "GOVERSION"])
        .output();
    let out =
        out.map_err(|e| Error::Io("running `go env GOVERSION` (is Go installed?)".into(), e))?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A `go` invocation with the project's settings: pinned modules only
/// (`go.sum` is committed, so the checksum database is not needed), no
/// toolchain downloads, static binaries, caches beside the binaries.
pub(crate) fn go_command(dir: &Path) -> Command {
    let cache = cache_root().join("go");
    let mut cmd = Command::new("go");
    cmd.current_dir(dir)
        .env("GOFLAGS", "-mod=readonly -buildvcs=false")
        .env("GOTOOLCHAIN", "local")
        .env("GOSUMDB", "off")
        .env("CGO_ENABLED", "0")
        .env("GOCACHE", cache.join("build"))
        .env("GOMODCACHE", cache.join("mod"));
    cmd
}

pub(crate) fn build(log: &mut dyn FnMut(&str)) -> Result<Binaries, Error> {
    let dir = binary_dir()?;
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).map_err(|e| Error::Io(partial.display().to_string(), e))?;
    let src = source_dir();

    let ldflags = kubernetes_ldflags();
    let out = format!("{}/", partial.display());

    let steps: [(&str, &Path, Vec<String>); 3] = [
        ("etcd", &src, go_build_args(&out, "-s -w", &["./etcd"])),
        (
            "kubernetes",
            &src,
            go_build_args(&out, &ldflags, &KUBERNETES_COMMANDS),
        ),
        (
            "kwok",
            &src.join("kwok"),
            go_build_args(&out, "-s -w", &["sigs.k8s.io/kwok/cmd/kwok"]),
        ),
    ];
    for (what, dir, args) in steps {
        log(&format!("building {what} (go {})", args.join(" ")));
        let started = Instant::now();
        run(go_command(dir).args(&args))?;
        log(&format!("built {what} in {}", seconds(started.elapsed())));
    }

    check_version(&partial, "kube-apiserver", KUBERNETES_VERSION)?;
    check_version(&partial, "kubectl", KUBERNETES_VERSION)?;
    check_version(&partial, "etcd", ETCD_VERSION.trim_start_matches('v'))?;
    complete(&partial, &dir, &cache_key()?)?;
    log(&format!(
        "control plane {KUBERNETES_VERSION} cached in {}",
        dir.display()
    ));
    Ok(Binaries { dir })
}

/// Linker flags for a binary of `k8s.io/kubernetes`: stripped, and stamped
/// with the release so `--version` reports it (not `v0.0.0-master`).
pub(crate) fn kubernetes_ldflags() -> String {
    let minor = kubernetes_minor();
    let mut ldflags = String::from("-s -w");
    for package in [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ] {
        ldflags.push_str(&format!(
            " -X {package}.gitVersion={KUBERNETES_VERSION} -X {package}.gitMajor=1 -X {package}.gitMinor={minor} -X {package}.gitTreeState=clean"
        ));
    }
    ldflags
}

/// `34` of `v1.34.4`.
pub(crate) fn kubernetes_minor() -> &'static str {
    KUBERNETES_VERSION
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .unwrap_or("0")
}

/// Marks the finished build in `partial` complete (its stamp says
/// `stamp`) and moves it into place at `dir`, replacing what was there: a
/// cache folder is either whole or absent.
pub fn complete(partial: &Path, dir: &Path, stamp: &str) -> Result<(), Error> {
    std::fs::write(partial.join(STAMP), stamp).map_err(|e| Error::Io("writing stamp".into(), e))?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(partial, dir).map_err(|e| Error::Io(dir.display().to_string(), e))
}

pub(crate) fn go_build_args(out: &str, ldflags: &str, packages: &[&str]) -> Vec<String> {
    let mut args = vec![
        "build".into(),
        "-trimpath".into(),
        "-ldflags".into(),
        ldflags.into(),
        "-o".into(),
        out.into(),
    ];
    args.extend(packages.iter().map(|p| p.to_string()));
    args
}

pub(crate) fn check_version(dir: &Path, binary: &str, expected: &str) -> Result<(), Error> {
    let path = dir.join(binary);
    let mut cmd = Command::new(&path);
    match binary {
        "kubectl" => cmd.args(["version", "--client"]),
        "helm" => cmd.args(["version", "--short"]),
        _ => cmd.arg("--version"),
    };
    let out = cmd
        .output()
        .map_err(|e| Error::Io(path.display().to_string(), e))?;
    let found = String::from_utf8_lossy(&out.stdout).to_string();
    if found.contains(expected) {
        Ok(())
    } else {
        Err(Error::WrongVersion {
            binary: binary.into(),
            found,
            expected: expected.into(),
        })
    }
}

pub fn run(cmd: &mut Command) -> Result<(), Error> {
    let described = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| Error::Io(described.clone(), e))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
    Err(Error::Command {
        command: described,
        status: out.status.to_string(),
        tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
    })
}

/// `12.3s` or `4m05s`.
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pin_is_found_from_the_test_bed() {
        for file in [
            "go.mod",
            "kwok/go.mod",
            "helm/go.mod",
            "kueue/go.mod",
            "jobset/go.mod",
            "kwok-stages.yaml",
        ] {
            let path = source_dir().join(file);
            assert!(path.is_file(), "{} is missing", path.display());
        }
        assert!(!source_dir().to_string_lossy().contains(".."));
    }
}
