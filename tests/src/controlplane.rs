//! The upstream Kubernetes binaries the test clusters run: which versions are
//! pinned, where they are cached, and how they are built from Go modules.
//!
//! The pins live in `tests/controlplane/go.mod` (Kubernetes and etcd) and
//! `tests/controlplane/kwok/go.mod` (kwok), with their `go.sum`. The cache key
//! is a digest of those files, the etcd main and the Go version, so changing a
//! pin builds anew and everything else reuses what is there.

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
const STAMP: &str = "complete";

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

/// The Go modules (`go.mod`, `go.sum`) that pin the control plane.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("controlplane")
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

/// Returns the cached binaries, building them first when they are missing.
/// `log` receives one line per step.
pub fn ensure_built(log: &mut dyn FnMut(&str)) -> Result<Binaries, Error> {
    if let Ok(binaries) = cached() {
        log(&format!(
            "control plane {KUBERNETES_VERSION} cached in {}",
            binaries.dir.display()
        ));
        return Ok(binaries);
    }
    build(log)
}

fn binary_dir() -> Result<PathBuf, Error> {
    Ok(cache_root().join("k8s").join(cache_key()?).join("bin"))
}

fn cache_key() -> Result<String, Error> {
    let src = source_dir();
    let mut digest = Sha256::new();
    for file in [
        "go.mod",
        "go.sum",
        "kwok/go.mod",
        "kwok/go.sum",
        "etcd/main.go",
    ] {
        let path = src.join(file);
        let bytes = std::fs::read(&path).map_err(|e| Error::Io(path.display().to_string(), e))?;
        digest.update(file.as_bytes());
        digest.update(&bytes);
    }
    digest.update(go_version()?.as_bytes());
    let hex: String = digest
        .finalize()
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(format!(
        "{KUBERNETES_VERSION}-etcd{ETCD_VERSION}-kwok{KWOK_VERSION}-{hex}"
    ))
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
fn go_command(dir: &Path) -> Command {
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

fn build(log: &mut dyn FnMut(&str)) -> Result<Binaries, Error> {
    let dir = binary_dir()?;
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).map_err(|e| Error::Io(partial.display().to_string(), e))?;
    let src = source_dir();

    let minor = KUBERNETES_VERSION
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .unwrap_or("0");
    let mut ldflags = String::from("-s -w");
    for package in [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ] {
        ldflags.push_str(&format!(
            " -X {package}.gitVersion={KUBERNETES_VERSION} -X {package}.gitMajor=1 -X {package}.gitMinor={minor} -X {package}.gitTreeState=clean"
        ));
    }
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
    std::fs::write(partial.join(STAMP), cache_key()?)
        .map_err(|e| Error::Io("writing stamp".into(), e))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&partial, &dir).map_err(|e| Error::Io(dir.display().to_string(), e))?;
    log(&format!(
        "control plane {KUBERNETES_VERSION} cached in {}",
        dir.display()
    ));
    Ok(Binaries { dir })
}

fn go_build_args(out: &str, ldflags: &str, packages: &[&str]) -> Vec<String> {
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

fn check_version(dir: &Path, binary: &str, expected: &str) -> Result<(), Error> {
    let path = dir.join(binary);
    let mut cmd = Command::new(&path);
    if binary == "kubectl" {
        cmd.args(["version", "--client"]);
    } else {
        cmd.arg("--version");
    }
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

fn run(cmd: &mut Command) -> Result<(), Error> {
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
