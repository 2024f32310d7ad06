//! Removing everything of a real node from the host, whether it stopped
//! cleanly or its owner was killed: its processes (kubelet, containerd, the
//! shims — which outlive containerd by design — and the containers under
//! them), its bridge, its containers' cgroups, its root folder. Its mounts
//! need no sweeping: they live in the node's own mount namespace
//! (`namespace.rs`), which the kernel tears down with its last process. Also
//! what a test asserts after a node stopped: that none of this is left.
//!
//! Container cgroups are containerd's default, `/k8s.io/<container id>` in
//! every hierarchy (the kubelet passes no cgroup parent without QoS
//! cgroups), so they are known by the ids the node's containerd recorded.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::layout::Layout;
use super::slot;

/// The cgroup containerd's CRI puts every container under.
const CONTAINERS_CGROUP: &str = "k8s.io";

/// How long killed processes get to disappear.
const KILL_TIMEOUT: Duration = Duration::from_secs(15);

/// One process, as `/proc` shows it.
#[derive(Debug, Clone)]
struct Proc {
    pid: i32,
    parent: i32,
    zombie: bool,
    cmdline: String,
    cgroups: String,
}

/// Kills every process of the node, deletes its bridge and cgroups and
/// removes its root. Returns what it had to remove, for the log; errors are
/// collected, not fatal, so one stuck piece does not keep the rest.
pub(crate) fn sweep(layout: &Layout) -> Vec<String> {
    let mut done = Vec::new();
    let containers = container_ids(&layout.root);
    let doomed = processes_of(layout, &containers);
    if !doomed.is_empty() {
        for process in &doomed {
            crate::host::processes::signal_pid(process.pid, libc::SIGKILL);
        }
        let deadline = Instant::now() + KILL_TIMEOUT;
        let pids: BTreeSet<i32> = doomed.iter().map(|p| p.pid).collect();
        loop {
            let alive: Vec<i32> = processes()
                .into_iter()
                .filter(|p| pids.contains(&p.pid) && !p.zombie)
                .map(|p| p.pid)
                .collect();
            if alive.is_empty() {
                done.push(format!("killed {} process(es)", doomed.len()));
                break;
            }
            if Instant::now() >= deadline {
                done.push(format!("processes {alive:?} survived SIGKILL"));
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let bridge = layout.bridge();
    if Path::new("/sys/class/net").join(&bridge).exists() {
        match Command::new("ip")
            .args(["link", "delete", &bridge])
            .output()
        {
            Ok(out) if out.status.success() => done.push(format!("deleted bridge {bridge}")),
            Ok(out) => done.push(format!(
                "deleting bridge {bridge}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => done.push(format!("deleting bridge {bridge} (ip link delete): {e}")),
        }
    }
    let cgroups = cgroup_dirs(&containers);
    if !cgroups.is_empty() {
        let failed: Vec<String> = cgroups
            .iter()
            .filter_map(|c| {
                remove_cgroup(c)
                    .err()
                    .map(|e| format!("{}: {e}", c.display()))
            })
            .collect();
        done.push(format!(
            "removed {} cgroup folder(s) of {} container(s){}",
            cgroups.len() - failed.len(),
            containers.len(),
            if failed.is_empty() {
                String::new()
            } else {
                format!("; failed: {failed:?}")
            }
        ));
    }
    // containerd's parent cgroup, once no other node may be using it.
    if !slot::others_held(layout.slot) {
        let removed = hierarchies()
            .map(|h| h.join(CONTAINERS_CGROUP))
            .filter(|parent| parent.is_dir() && std::fs::remove_dir(parent).is_ok())
            .count();
        if removed > 0 {
            done.push(format!(
                "removed the cgroup /{CONTAINERS_CGROUP} from {removed} hierarchies"
            ));
        }
    }
    for mount in host_mounts_under(&layout.root).into_iter().rev() {
        // Not expected (the node mounts in its own namespace); whatever is
        // there would keep the root from being removed.
        unmount(&mount);
        done.push(format!("unmounted {}", mount.display()));
    }
    if layout.root.exists() {
        match std::fs::remove_dir_all(&layout.root) {
            Ok(()) => done.push(format!("removed {}", layout.root.display())),
            Err(e) => done.push(format!("removing {}: {e}", layout.root.display())),
        }
    }
    done
}

/// What is left of the node on the host: processes, mounts under its root,
/// its bridge, the cgroups of `containers`, its root folder. Empty once it
/// is fully gone.
pub(crate) fn leftovers(layout: &Layout, containers: &BTreeSet<String>) -> Vec<String> {
    let mut left: Vec<String> = processes_of(layout, containers)
        .into_iter()
        .map(|p| format!("process {} ({})", p.pid, p.cmdline))
        .collect();
    left.extend(
        host_mounts_under(&layout.root)
            .into_iter()
            .map(|m| format!("mount {}", m.display())),
    );
    if Path::new("/sys/class/net").join(layout.bridge()).exists() {
        left.push(format!("bridge {}", layout.bridge()));
    }
    left.extend(
        cgroup_dirs(containers)
            .into_iter()
            .map(|c| format!("cgroup {}", c.display())),
    );
    if layout.root.exists() {
        left.push(format!("folder {}", layout.root.display()));
    }
    left
}

/// The ids of the containers and sandboxes the node's containerd knows of
/// (running or not), from its root.
pub(crate) fn container_ids(root: &Path) -> BTreeSet<String> {
    [
        "containerd-state/io.containerd.runtime.v2.task/k8s.io",
        "containerd/io.containerd.grpc.v1.cri/containers",
        "containerd/io.containerd.grpc.v1.cri/sandboxes",
    ]
    .iter()
    .filter_map(|dir| std::fs::read_dir(root.join(dir)).ok())
    .flat_map(|entries| entries.flatten())
    .filter_map(|e| e.file_name().into_string().ok())
    .collect()
}

/// The node's processes: those whose command line names its root (kubelet,
/// containerd, the shims, which are given containerd's socket), everything
/// below them, and whatever runs in the cgroups of its `containers` — never
/// this process or its ancestors.
fn processes_of(layout: &Layout, containers: &BTreeSet<String>) -> Vec<Proc> {
    let all = processes();
    // With the slash, so node-1 does not claim node-10's processes.
    let root = format!("{}/", layout.root.display());
    let in_container = |line: &str| {
        line.rsplit_once(&format!("/{CONTAINERS_CGROUP}/"))
            .is_some_and(|(_, id)| containers.contains(id))
    };
    let spared = ancestors(&all);
    let mut chosen: BTreeSet<i32> = all
        .iter()
        .filter(|p| p.cmdline.contains(&root) || p.cgroups.lines().any(in_container))
        .map(|p| p.pid)
        .collect();
    // Descendants, until no new one turns up.
    loop {
        let before = chosen.len();
        for p in &all {
            if chosen.contains(&p.parent) {
                chosen.insert(p.pid);
            }
        }
        if chosen.len() == before {
            break;
        }
    }
    all.into_iter()
        .filter(|p| chosen.contains(&p.pid) && !spared.contains(&p.pid) && !p.zombie)
        .collect()
}

/// This process and its ancestors.
fn ancestors(all: &[Proc]) -> BTreeSet<i32> {
    let parents: BTreeMap<i32, i32> = all.iter().map(|p| (p.pid, p.parent)).collect();
    let mut spared = BTreeSet::new();
    let mut pid = std::process::id() as i32;
    while pid > 0 && spared.insert(pid) {
        pid = parents.get(&pid).copied().unwrap_or(0);
    }
    spared
}

fn processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let dir = PathBuf::from(format!("/proc/{pid}"));
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            let (state, parent) = parse_stat(&stat)?;
            let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .trim()
                .to_string();
            let cgroups = std::fs::read_to_string(dir.join("cgroup")).unwrap_or_default();
            Some(Proc {
                pid,
                parent,
                zombie: state == 'Z' || state == 'X',
                cmdline,
                cgroups,
            })
        })
        .collect()
}

/// State and parent pid from `/proc/<pid>/stat` (`pid (comm) S ppid …`;
/// the command may hold spaces and parentheses, so read after the last `)`).
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

/// The cgroups of `containers`, in every hierarchy where they exist.
fn cgroup_dirs(containers: &BTreeSet<String>) -> Vec<PathBuf> {
    hierarchies()
        .flat_map(|h| {
            containers
                .iter()
                .map(move |id| h.join(CONTAINERS_CGROUP).join(id))
        })
        .filter(|dir| dir.is_dir())
        .collect()
}

/// The roots of the cgroup hierarchies: `/sys/fs/cgroup` (cgroup v2), and
/// each folder in it (v1 controllers, and the unified one of a hybrid).
fn hierarchies() -> impl Iterator<Item = PathBuf> {
    let base = Path::new("/sys/fs/cgroup");
    let v1 = std::fs::read_dir(base)
        .into_iter()
        .flat_map(|entries| entries.flatten())
        .map(|e| e.path())
        .filter(|p| p.is_dir());
    std::iter::once(base.to_path_buf()).chain(v1)
}

/// Removes a cgroup and the ones below it (cgroups are removed with rmdir,
/// deepest first; their files are not real).
fn remove_cgroup(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)?.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_cgroup(&entry.path())?;
        }
    }
    std::fs::remove_dir(dir)
}

/// Mount points at or below `root` in this process's mount namespace,
/// in mount order.
fn host_mounts_under(root: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape_mount(field)))
        .filter(|mount| mount.starts_with(root))
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape_mount(field: &str) -> String {
    let mut out = String::new();
    let mut chars = field.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let digits: String = chars.clone().take(3).collect();
            if let (3, Ok(code)) = (digits.len(), u8::from_str_radix(&digits, 8)) {
                out.push(char::from(code));
                for _ in 0..3 {
                    chars.next();
                }
                continue;
            }
        }
        out.push(c);
    }
    out
}

#[allow(unsafe_code)]
fn unmount(path: &Path) {
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return;
    };
    // SAFETY: umount2(2) with a NUL-terminated path that outlives the call.
    unsafe {
        libc::umount2(path.as_ptr(), libc::MNT_DETACH);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_read_after_the_command_whatever_it_holds() {
        assert_eq!(
            parse_stat("42 (containerd-shim) S 1 42 42 0 -1"),
            Some(('S', 1))
        );
        assert_eq!(parse_stat("7 (a (b) c) Z 3 7 7 0"), Some(('Z', 3)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn mount_points_with_spaces_are_unescaped() {
        assert_eq!(unescape_mount(r"/run/a\040b"), "/run/a b");
        assert_eq!(unescape_mount(r"/plain"), "/plain");
    }

    #[test]
    fn this_process_and_its_parents_are_never_the_nodes() {
        let all = processes();
        let spared = ancestors(&all);
        assert!(spared.contains(&(std::process::id() as i32)));
        let layout = Layout::new(
            0,
            Path::new("/nonexistent-root-of-no-node"),
            "real-node-0",
            "/tmp".into(),
        );
        assert!(
            processes_of(&layout, &BTreeSet::new())
                .iter()
                .all(|p| !spared.contains(&p.pid))
        );
    }
}
