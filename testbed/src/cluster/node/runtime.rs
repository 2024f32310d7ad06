//! What a real node runs, built from Go modules and cached like the control
//! plane: kubelet (from the control plane's own `k8s.io/kubernetes` module),
//! containerd with ctr and the runc shim, runc (cgo, `seccomp`, linked
//! statically against Debian's libseccomp), the CNI plugins, and two images
//! of the test bed's own — the sandbox's pause and a workload for test Pods.
//!
//! The pins live in `tests/controlplane/node/{containerd,runc,cni}/go.mod`
//! (one module each, so minimal version selection keeps every upstream's own
//! pins) and `tests/controlplane/node/images`. kubelet is built from a copy
//! of the control plane's `go.mod` — the same versions, so the control
//! plane's Go build cache serves it — whose `go.sum` gains the checksums of
//! the two modules only kubelet imports (`node/kubelet.go.sum`); the control
//! plane's own files stay untouched, and so does its cache key. The cache
//! folder has a key of its own: moving a node pin never rebuilds the control
//! plane; moving Kubernetes rebuilds kubelet here too.
//!
//! When Kubernetes moves and kubelet's build reports a missing `go.sum`
//! entry, regenerate `node/kubelet.go.sum` in a scratch copy of
//! `tests/controlplane`: `GOFLAGS=-mod=mod go list -deps
//! k8s.io/kubernetes/cmd/kubelet`, then keep the lines it added to `go.sum`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::go::controlplane::{
    Error, KUBERNETES_VERSION, STAMP, cache_root, check_version, digest, go_command,
    kubernetes_ldflags, run, seconds, source_dir,
};
use crate::go::oci_image::{Image, ImageFile, write_archive};

mod runc;

/// The containerd release the real nodes run.
pub const CONTAINERD_VERSION: &str = "v2.4.2";
/// The runc release containerd starts containers with.
pub const RUNC_VERSION: &str = "v1.5.2";
/// The CNI plugins release that wires Pods to the node's bridge.
pub const CNI_PLUGINS_VERSION: &str = "v1.10.0";

/// The sandbox image every Pod's namespaces are held by.
pub const PAUSE_IMAGE: &str = "jobrelay.test/pause:1";
/// The image of test Pods: `/workload` sleeps and exits as told (see
/// `tests/controlplane/node/images/workload/main.go`).
pub const WORKLOAD_IMAGE: &str = "jobrelay.test/workload:1";

/// Bumped when how the runtime is built or packed changes, so a cache of the
/// old recipe is not reused.
const RECIPE: &str = "1";

/// The files the cache key covers, under [`source_dir`].
const SOURCES: [&str; 12] = [
    "go.mod",
    "go.sum",
    "node/kubelet.go.sum",
    "node/containerd/go.mod",
    "node/containerd/go.sum",
    "node/runc/go.mod",
    "node/runc/go.sum",
    "node/cni/go.mod",
    "node/cni/go.sum",
    "node/images/go.mod",
    "node/images/pause/main.go",
    "node/images/workload/main.go",
];

const CNI_PLUGINS: [&str; 4] = ["bridge", "loopback", "host-local", "portmap"];

/// A built node runtime.
#[derive(Debug, Clone)]
pub struct NodeRuntime {
    dir: PathBuf,
}

impl NodeRuntime {
    /// `kubelet`, `containerd`, `ctr` or `containerd-shim-runc-v2`.
    pub fn binary(&self, name: &str) -> PathBuf {
        self.dir.join("bin").join(name)
    }

    /// The folder of the runtime's binaries (containerd finds its shim here).
    pub fn bin_dir(&self) -> PathBuf {
        self.dir.join("bin")
    }

    /// The runc containerd runs: the one built here, or (when libseccomp
    /// could not be had at build time) the distribution's on `PATH`.
    pub fn runc(&self) -> PathBuf {
        let built = self.binary("runc");
        if built.is_file() {
            return built;
        }
        std::fs::read_to_string(self.dir.join("runc-path"))
            .map(|path| PathBuf::from(path.trim()))
            .unwrap_or(built)
    }

    /// The folder of the CNI plugins.
    pub fn cni_dir(&self) -> PathBuf {
        self.dir.join("cni")
    }

    /// The OCI archive of [`PAUSE_IMAGE`].
    pub fn pause_image(&self) -> PathBuf {
        self.dir.join("images").join("pause.tar")
    }

    /// The OCI archive of [`WORKLOAD_IMAGE`].
    pub fn workload_image(&self) -> PathBuf {
        self.dir.join("images").join("workload.tar")
    }
}

/// The cached node runtime of the current pins, if it was built before.
pub fn node_runtime() -> Result<NodeRuntime, Error> {
    let dir = node_dir()?;
    if dir.join(STAMP).is_file() {
        Ok(NodeRuntime { dir })
    } else {
        Err(Error::NodeRuntimeNotBuilt(dir))
    }
}

/// Returns the cached node runtime, building it first when it is missing.
pub fn ensure_node_runtime_built(log: &mut dyn FnMut(&str)) -> Result<NodeRuntime, Error> {
    if let Ok(runtime) = node_runtime() {
        log(&format!(
            "node runtime (kubelet {KUBERNETES_VERSION}, containerd {CONTAINERD_VERSION}, runc {RUNC_VERSION}) cached in {}",
            runtime.dir.display()
        ));
        return Ok(runtime);
    }
    build(log)
}

fn node_dir() -> Result<PathBuf, Error> {
    let key = format!(
        "{KUBERNETES_VERSION}-containerd{CONTAINERD_VERSION}-runc{RUNC_VERSION}-cni{CNI_PLUGINS_VERSION}-{}",
        digest(&SOURCES)?
    );
    Ok(cache_root().join("node").join(format!("{key}-r{RECIPE}")))
}

fn build(log: &mut dyn FnMut(&str)) -> Result<NodeRuntime, Error> {
    let dir = node_dir()?;
    // Not `with_extension`: the key holds dots (`v1.10.0`).
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    let partial = dir.with_file_name(name);
    let _ = std::fs::remove_dir_all(&partial);
    let bin = partial.join("bin");
    let cni = partial.join("cni");
    let images = partial.join("images");
    let programs = partial.join("programs");
    for folder in [&bin, &cni, &images, &programs] {
        std::fs::create_dir_all(folder).map_err(|e| Error::Io(folder.display().to_string(), e))?;
    }
    let src = source_dir();
    let node = src.join("node");
    let kubelet_module = kubelet_module(&partial)?;
    let out = |dir: &Path| format!("{}/", dir.display());
    let containerd_ldflags = {
        let package = "github.com/containerd/containerd/v2";
        format!(
            "-s -w -X {package}/version.Version={CONTAINERD_VERSION} -X {package}/version.Package={package} -X {package}/version.Revision=jobrelay-test-kit"
        )
    };
    let containerd_tags = "no_btrfs no_devmapper no_zfs urfave_cli_no_docs";

    let steps: [(&str, PathBuf, Vec<String>); 5] = [
        (
            "kubelet",
            kubelet_module.clone(),
            build_args(
                &out(&bin),
                "",
                &kubernetes_ldflags(),
                &["k8s.io/kubernetes/cmd/kubelet"],
            ),
        ),
        (
            "containerd and ctr",
            node.join("containerd"),
            build_args(
                &out(&bin),
                containerd_tags,
                &containerd_ldflags,
                &[
                    "github.com/containerd/containerd/v2/cmd/containerd",
                    "github.com/containerd/containerd/v2/cmd/ctr",
                ],
            ),
        ),
        (
            // As containerd's release builds it: without gRPC.
            "containerd-shim-runc-v2",
            node.join("containerd"),
            build_args(
                &out(&bin),
                &format!("{containerd_tags} no_grpc"),
                &containerd_ldflags,
                &["github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"],
            ),
        ),
        (
            "the CNI plugins",
            node.join("cni"),
            build_args(
                &out(&cni),
                "",
                &format!(
                    "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion={CNI_PLUGINS_VERSION}"
                ),
                &[
                    "github.com/containernetworking/plugins/plugins/main/bridge",
                    "github.com/containernetworking/plugins/plugins/main/loopback",
                    "github.com/containernetworking/plugins/plugins/ipam/host-local",
                    "github.com/containernetworking/plugins/plugins/meta/portmap",
                ],
            ),
        ),
        (
            "the pause and workload programs",
            node.join("images"),
            build_args(&out(&programs), "", "-s -w", &["./pause", "./workload"]),
        ),
    ];
    for (what, dir, args) in steps {
        log(&format!("building {what} (go {})", args.join(" ")));
        let started = Instant::now();
        run(go_command(&dir).args(&args))?;
        log(&format!("built {what} in {}", seconds(started.elapsed())));
    }
    runc::build_runc(&partial, log)?;

    check_version(&bin, "kubelet", KUBERNETES_VERSION)?;
    check_version(&bin, "containerd", CONTAINERD_VERSION)?;
    for plugin in CNI_PLUGINS {
        if !cni.join(plugin).is_file() {
            return Err(Error::Io(
                format!("CNI plugin {plugin} in {}", cni.display()),
                std::io::ErrorKind::NotFound.into(),
            ));
        }
    }
    pack_images(&programs, &images)?;
    let _ = std::fs::remove_dir_all(&programs);
    let _ = std::fs::remove_dir_all(&kubelet_module);

    std::fs::write(partial.join(STAMP), node_dir()?.display().to_string())
        .map_err(|e| Error::Io("writing stamp".into(), e))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&partial, &dir).map_err(|e| Error::Io(dir.display().to_string(), e))?;
    log(&format!("node runtime cached in {}", dir.display()));
    Ok(NodeRuntime { dir })
}

/// A module to build kubelet in: the control plane's `go.mod`, and its
/// `go.sum` with kubelet's extra checksums.
fn kubelet_module(partial: &Path) -> Result<PathBuf, Error> {
    let src = source_dir();
    let module = partial.join("kubelet-module");
    std::fs::create_dir_all(&module).map_err(|e| Error::Io(module.display().to_string(), e))?;
    let read = |file: &str| {
        let path = src.join(file);
        std::fs::read_to_string(&path).map_err(|e| Error::Io(path.display().to_string(), e))
    };
    let sums = format!("{}{}", read("go.sum")?, read("node/kubelet.go.sum")?);
    for (file, text) in [("go.mod", read("go.mod")?), ("go.sum", sums)] {
        let path = module.join(file);
        std::fs::write(&path, text).map_err(|e| Error::Io(path.display().to_string(), e))?;
    }
    Ok(module)
}

fn build_args(out: &str, tags: &str, ldflags: &str, packages: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec!["build".into(), "-trimpath".into()];
    if !tags.is_empty() {
        args.extend(["-tags".into(), tags.into()]);
    }
    args.extend(["-ldflags".into(), ldflags.into(), "-o".into(), out.into()]);
    args.extend(packages.iter().map(|p| p.to_string()));
    args
}

/// Packs the pause and workload programs into their images.
fn pack_images(programs: &Path, images: &Path) -> Result<(), Error> {
    for (name, program, archive) in [
        (PAUSE_IMAGE, "pause", "pause.tar"),
        (WORKLOAD_IMAGE, "workload", "workload.tar"),
    ] {
        let path = programs.join(program);
        let content = std::fs::read(&path).map_err(|e| Error::Io(path.display().to_string(), e))?;
        let image = Image {
            name: name.into(),
            entrypoint: vec![format!("/{program}")],
            user: "65532".into(),
            files: vec![ImageFile {
                path: program.into(),
                content,
                mode: 0o755,
            }],
        };
        let target = images.join(archive);
        write_archive(&image, &target)?;
    }
    Ok(())
}
