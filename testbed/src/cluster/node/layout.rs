//! Where a real node keeps its files on this host, and its bridge, subnet
//! and network names: all derived from its slot.

use std::path::{Path, PathBuf};

/// One real node's places on this host, all derived from its slot (see
/// `slot.rs`): nodes of clusters running side by side differ in every one.
/// (Container cgroups are containerd's, `/k8s.io/<id>`: without QoS
/// cgroups the kubelet passes no cgroup parent, `cgroupRoot` included.)
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub slot: usize,
    /// `/run/jobrelay-nodes/node-<slot>`: everything but the logs. Short, so
    /// the unix sockets below it stay within their length limit.
    pub root: PathBuf,
    /// The Node's name.
    pub name: String,
    /// Where the kubelet writes Pod logs (in the cluster's state folder).
    pub pod_logs: PathBuf,
}

impl Layout {
    pub fn new(slot: usize, slots_dir: &Path, name: &str, pod_logs: PathBuf) -> Layout {
        Layout {
            slot,
            root: slots_dir.join(format!("node-{slot}")),
            name: name.into(),
            pod_logs,
        }
    }

    pub fn containerd_socket(&self) -> PathBuf {
        self.root.join("containerd.sock")
    }

    pub fn containerd_config(&self) -> PathBuf {
        self.root.join("containerd.toml")
    }

    pub fn kubelet_config(&self) -> PathBuf {
        self.root.join("kubelet.yaml")
    }

    pub fn kubelet_root(&self) -> PathBuf {
        self.root.join("kubelet")
    }

    /// The kubelet's client certificate, kubeconfig and self-signed serving
    /// certificate.
    pub fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }

    pub fn cni_conf_dir(&self) -> PathBuf {
        self.root.join("cni").join("net.d")
    }

    /// A folder of this node's that hides the host folder `host` (e.g.
    /// `/var/lib/cni`) from the node's processes.
    pub fn private(&self, host: &str) -> PathBuf {
        self.root
            .join("private")
            .join(host.trim_start_matches('/').replace('/', "_"))
    }

    /// Files that stand in for host sysctls the node's processes would
    /// otherwise write (see `namespace.rs`).
    pub fn sysctl_dir(&self) -> PathBuf {
        self.root.join("sysctl")
    }

    /// The Linux bridge its Pods hang on (at most 15 characters).
    pub fn bridge(&self) -> String {
        format!("jrnode{}", self.slot)
    }

    /// The CNI network's name, also the prefix of CNI's cache entries.
    pub fn network(&self) -> String {
        format!("jobrelay-node-{}", self.slot)
    }

    /// The Pod subnet; the bridge takes its first address.
    pub fn subnet(&self) -> String {
        format!("10.244.{}.0/24", self.slot)
    }

    /// The bridge's address, the node's own: its InternalIP, so the kubelet
    /// probes `hostNetwork` Pods there, never at the host's real interface.
    pub fn gateway(&self) -> String {
        format!("10.244.{}.1", self.slot)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn layout(slot: usize) -> Layout {
        Layout::new(
            slot,
            Path::new("/run/jobrelay-nodes"),
            "real-node-0",
            "/state/worker-1/pod-logs".into(),
        )
    }

    #[test]
    fn nodes_in_other_slots_share_no_bridge_subnet_or_socket() {
        let (a, b) = (layout(0), layout(1));
        assert_ne!(a.bridge(), b.bridge());
        assert_ne!(a.subnet(), b.subnet());
        assert_ne!(a.network(), b.network());
        assert_ne!(a.containerd_socket(), b.containerd_socket());
        assert!(
            layout(31).bridge().len() <= 15,
            "Linux caps interface names"
        );
        assert!(
            a.containerd_socket().as_os_str().len() + ".ttrpc".len() < 100,
            "unix socket paths are short"
        );
    }
}
