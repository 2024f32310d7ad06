//! A real node beside kwok's fake one: a kubelet and a containerd of its
//! own (runc, CNI bridge) registered with one test cluster, so Pods run as
//! real containers from images the test bed builds.
//!
//! The node runs in the host's network namespace (Pods that must reach the
//! API server use `hostNetwork: true` and `KUBERNETES_SERVICE_HOST`/`PORT`
//! set to its loopback address; others get an address on the node's
//! bridge) and in a mount namespace of its own (`namespace.rs`). It holds a
//! host-wide slot (`slot.rs`) for its bridge, subnet, cgroup and root under
//! `/run/jobrelay-nodes`; its logs go to the cluster's state folder. It is
//! tainted and labelled (`jobrelay.dev/real-node`), so only Pods meant for
//! it land there. Stopping it — or the next node taking its slot after its
//! owner was killed — removes every process, cgroup and folder it had.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::certs::Pki;
use crate::cluster::ClusterInfo;
use crate::host::processes::{die_with_parent, log_to, signal};
use crate::wait::{self, Seen};

mod cleanup;
mod config;
mod containerd;
pub mod info;
mod kubelet;
mod layout;
mod namespace;
pub mod runtime;
mod slot;

pub use config::{REAL_NODE_LABEL, REAL_NODE_TAINT};
pub use info::{Error, RealNodeInfo};
pub use runtime::{PAUSE_IMAGE, WORKLOAD_IMAGE, ensure_node_runtime_built, node_runtime};

use layout::Layout;
use slot::{SLOTS_DIR, Slot};

/// The name of the (first) real node in a cluster that has one; the
/// others are `real-node-1`, `real-node-2`, ….
pub const REAL_NODE: &str = "real-node-0";

/// The name of a cluster's real node number `index`.
pub fn real_node_name(index: usize) -> String {
    format!("real-node-{index}")
}

/// How long a stopped kubelet or containerd gets before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

impl RealNodeInfo {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's InternalIP (its bridge's address on this host), where
    /// its `hostNetwork` Pods listen with `listenOnPodIP`.
    pub fn address(&self) -> String {
        self.layout().gateway()
    }

    /// Imports the OCI or Docker image archive at `archive` into the node's
    /// containerd (`k8s.io` namespace, where the kubelet looks), so Pods can
    /// run it with `imagePullPolicy: Never`.
    pub fn import_image(&self, archive: &Path) -> Result<(), Error> {
        let ctr = node_runtime()?.binary("ctr");
        let mut command = Command::new(&ctr);
        command
            .arg(format!("--address={}", self.containerd_address.display()))
            .args(["--namespace=k8s.io", "images", "import"])
            .arg(format!("--snapshotter={}", self.snapshotter))
            .arg(archive);
        run(&mut command)
    }

    /// The ids of the containers and sandboxes the node has run so far
    /// (read from its root while it runs).
    pub fn containers(&self) -> BTreeSet<String> {
        cleanup::container_ids(&self.root)
    }

    /// What is left of the node on this host — processes, mounts, its
    /// bridge, the cgroups of `containers` (see [`containers`](Self::containers)),
    /// its root folder — each described; empty once it is gone.
    pub fn leftovers(&self, containers: &BTreeSet<String>) -> Vec<String> {
        cleanup::leftovers(&self.layout(), containers)
    }

    fn layout(&self) -> Layout {
        Layout {
            slot: self.slot,
            root: self.root.clone(),
            name: self.name.clone(),
            pod_logs: self.pod_logs.clone(),
        }
    }
}

/// What real nodes left on this host once none runs: waits (up to
/// `timeout`) until no process holds a slot — a test process's clusters
/// stop after it ends — then lists, slot by slot, every process, mount,
/// bridge, cgroup and folder a node left. Empty when the host is clean.
pub async fn host_leftovers(timeout: Duration) -> Vec<String> {
    let free = wait::try_until("every real-node slot released", timeout, || async {
        match slot::held() {
            held if held.is_empty() => Seen::Ready(()),
            held => Seen::Waiting(format!("slots {held:?} held")),
        }
    })
    .await;
    if let Err(timeout) = free {
        return vec![timeout.to_string()];
    }
    (0..slot::SLOTS)
        .flat_map(|index| {
            let layout = Layout::new(index, Path::new(SLOTS_DIR), "", PathBuf::new());
            let containers = cleanup::container_ids(&layout.root);
            cleanup::leftovers(&layout, &containers)
                .into_iter()
                .map(move |left| format!("slot {index}: {left}"))
        })
        .collect()
}

/// A running real node; dropping it stops it.
pub struct RealNode {
    info: RealNodeInfo,
    layout: Layout,
    cluster: String,
    /// `<cluster>-<node>`: the prefix of its processes' names and logs.
    component: String,
    logs: PathBuf,
    containerd: Option<Child>,
    kubelet: Option<Child>,
    _slot: Slot,
}

impl RealNode {
    /// Starts real node number `index` of `cluster` — containerd with the
    /// test bed's pause and workload images, then a kubelet with a client
    /// certificate of the clusters' CA (`pki`) — and returns once the Node
    /// is Ready. Its logs go to `logs` (`<cluster>-<node>-containerd.log`,
    /// `<cluster>-<node>-kubelet.log`), Pod logs under
    /// `<cluster_dir>/pod-logs/<node>`. Must run on a thread that lives as
    /// long as the node should (the processes get a parent-death signal).
    pub async fn start(
        cluster: &ClusterInfo,
        index: usize,
        pki: &Pki,
        cluster_dir: &Path,
        logs: &Path,
    ) -> Result<RealNode, Error> {
        let started = Instant::now();
        let runtime = node_runtime()?;
        let name = real_node_name(index);
        let slot = Slot::acquire(&format!("real node {name} of {}", cluster.name))
            .map_err(|e| Error::Io(format!("taking a real-node slot in {SLOTS_DIR}"), e))?;
        let layout = Layout::new(
            slot.index,
            Path::new(SLOTS_DIR),
            &name,
            cluster_dir.join("pod-logs").join(&name),
        );
        for line in cleanup::sweep(&layout) {
            eprintln!(
                "real node of {}: slot {} before use: {line}",
                cluster.name, layout.slot
            );
        }
        let mut node = RealNode {
            info: RealNodeInfo {
                name: name.clone(),
                slot: layout.slot,
                root: layout.root.clone(),
                containerd_address: layout.containerd_socket(),
                snapshotter: String::new(),
                pod_logs: layout.pod_logs.clone(),
            },
            layout,
            cluster: cluster.name.clone(),
            component: format!("{}-{name}", cluster.name),
            logs: logs.to_path_buf(),
            containerd: None,
            kubelet: None,
            _slot: slot,
        };
        // On any error below, dropping `node` stops what was started.
        node.start_containerd(&runtime).await?;
        node.info.import_image(&runtime.pause_image())?;
        node.info.import_image(&runtime.workload_image())?;
        node.start_kubelet(&runtime, cluster, pki).await?;
        eprintln!(
            "real node of {}: {name} Ready in {:.1}s (slot {}, snapshotter {})",
            cluster.name,
            started.elapsed().as_secs_f64(),
            node.layout.slot,
            node.info.snapshotter
        );
        Ok(node)
    }

    pub fn info(&self) -> &RealNodeInfo {
        &self.info
    }

    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// Imports an image archive into the node's containerd.
    pub fn import_image(&self, archive: &Path) -> Result<(), Error> {
        self.info.import_image(archive)
    }

    /// The node's processes that exited, with their exit status.
    pub fn exited(&mut self) -> Vec<(String, String)> {
        let component = self.component.clone();
        [
            ("containerd", &mut self.containerd),
            ("kubelet", &mut self.kubelet),
        ]
        .into_iter()
        .filter_map(|(what, child)| match child.as_mut()?.try_wait() {
            Ok(Some(status)) => Some((format!("{component}-{what}"), status.to_string())),
            _ => None,
        })
        .collect()
    }

    /// Stops the kubelet, then containerd (SIGTERM, SIGKILL after a grace
    /// period), then sweeps what they leave: shims, containers, the bridge,
    /// cgroups, the root folder.
    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        for child in [self.kubelet.take(), self.containerd.take()]
            .into_iter()
            .flatten()
        {
            stop_child(child);
        }
        for line in cleanup::sweep(&self.layout) {
            eprintln!("real node of {}: stopping: {line}", self.cluster);
        }
    }

    fn spawn(&self, what: &str, mut command: Command) -> Result<Child, Error> {
        let log_path = self.log_path(what);
        log_to(&mut command, &log_path)
            .map_err(|e| Error::Io(log_path.display().to_string(), e))?;
        die_with_parent(&mut command);
        command
            .spawn()
            .map_err(|e| Error::Io(format!("starting {what} for {}", self.cluster), e))
    }

    fn log_path(&self, what: &str) -> PathBuf {
        self.logs.join(format!("{}-{what}.log", self.component))
    }

    fn pid(&self, what: &str) -> i32 {
        let child = match what {
            "kubelet" => self.kubelet.as_ref(),
            _ => self.containerd.as_ref(),
        };
        child.map_or(0, |c| c.id() as i32)
    }

    fn exited_error(&mut self, what: &str, log: &Path) -> Error {
        let status = self
            .exited()
            .into_iter()
            .find(|(name, _)| name.ends_with(what))
            .map_or_else(|| "gone".to_string(), |(_, status)| status);
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        Error::Exited {
            component: format!("{}-{what}", self.component),
            status,
            log: log.display().to_string(),
            tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        }
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Whether process `pid` runs (not a zombie).
fn alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

fn stop_child(mut child: Child) {
    signal(&child, libc::SIGTERM);
    let deadline = Instant::now() + STOP_GRACE;
    while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|e| Error::Io(path.display().to_string(), e))
}

fn free_port() -> Result<u16, Error> {
    crate::host::ports::free_port().map_err(|e| Error::Io("picking a free port".into(), e))
}

fn run(command: &mut Command) -> Result<(), Error> {
    let described = format!("{command:?}");
    let out = command
        .output()
        .map_err(|e| Error::Io(described.clone(), e))?;
    if out.status.success() {
        return Ok(());
    }
    Err(Error::Command {
        command: described,
        status: out.status.to_string(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .trim()
        .to_string(),
    })
}
