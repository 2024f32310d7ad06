//! What a real node's containerd, CNI and kubelet are configured with —
//! plain text from plain data, so every setting the node depends on is
//! checked without starting it.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::layout::Layout;
use super::runtime::PAUSE_IMAGE;

/// The label a real node carries, for a Pod's `nodeSelector`.
pub const REAL_NODE_LABEL: &str = "jobrelay.dev/real-node";
/// The taint (`NoSchedule`, value `true`) a real node registers with, so only
/// Pods that tolerate it land there.
pub const REAL_NODE_TAINT: &str = "jobrelay.dev/real-node";

/// The host folders a node's processes write into on their own; each is
/// replaced, in the node's mount namespace, by a folder of the node's.
/// containerd's shim sockets (`/run/containerd/s`), CNI's cache
/// (`/var/lib/cni`), the kubelet's log links (`/var/log/containers`) and
/// its device-plugin socket, which it puts in `/var/lib/kubelet/device-plugins`
/// whatever its `--root-dir` (two kubelets starting at once on the host's
/// folder fail with "bind: address already in use").
pub(crate) const PRIVATE_FOLDERS: [&str; 4] = [
    "/run/containerd",
    "/var/lib/cni",
    "/var/log/containers",
    "/var/lib/kubelet/device-plugins",
];

/// Host sysctls the kubelet sets when they differ from what it wants
/// (`protectKernelDefaults: false`) or refuses to start over (`true`), and
/// the bridge plugin's IPv4 forwarding: each with the value they want, so
/// in the node's mount namespace they read as already set and the host's
/// stay untouched.
pub(crate) const SYSCTLS: [(&str, &str); 7] = [
    ("vm/overcommit_memory", "1"),
    ("vm/panic_on_oom", "0"),
    ("kernel/panic", "10"),
    ("kernel/panic_on_oops", "1"),
    ("kernel/keys/root_maxkeys", "1000000"),
    ("kernel/keys/root_maxbytes", "25000000"),
    ("net/ipv4/ip_forward", "1"),
];

/// Paths of what containerd runs.
pub(crate) struct RuntimePaths {
    pub runc: PathBuf,
    pub cni_bin: PathBuf,
}

/// containerd's configuration (version 3, containerd 2.x): its own root,
/// state and socket; CRI with the runc runtime (cgroupfs), the pause image
/// pinned as sandbox, OOM score adjustments clamped (the sandbox cannot
/// lower them), network namespaces kept under its state, CNI from the
/// node's folders; NRI off (its socket is host-wide).
pub(crate) fn containerd_toml(layout: &Layout, paths: &RuntimePaths, snapshotter: &str) -> String {
    let root = layout.root.join("containerd");
    let state = layout.root.join("containerd-state");
    let socket = layout.containerd_socket();
    format!(
        r#"version = 3
root = "{root}"
state = "{state}"

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "{snapshotter}"

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "{PAUSE_IMAGE}"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  disable_apparmor = true

[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  BinaryName = "{runc}"
  SystemdCgroup = false

[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["{cni_bin}"]
  conf_dir = "{cni_conf}"
  max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[[plugins."io.containerd.transfer.v1.local".unpack_config]]
  platform = "linux/{arch}"
  snapshotter = "{snapshotter}"
"#,
        root = root.display(),
        state = state.display(),
        socket = socket.display(),
        runc = paths.runc.display(),
        cni_bin = paths.cni_bin.display(),
        cni_conf = layout.cni_conf_dir().display(),
        opt = layout.root.join("opt").display(),
        arch = crate::go::oci_image::go_architecture(),
    )
}

/// The CNI network: a bridge of the node's own with the gateway address
/// (Pods reach the host there), host-local addresses from the node's subnet
/// kept under its root, no masquerading (no iptables needed), and portmap
/// for `hostPort`s.
pub(crate) fn cni_conflist(layout: &Layout) -> String {
    let conf = json!({
        "cniVersion": "1.0.0",
        "name": layout.network(),
        "plugins": [
            {
                "type": "bridge",
                "bridge": layout.bridge(),
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": layout.subnet()}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": layout.root.join("cni").join("ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    });
    serde_json::to_string_pretty(&conf).expect("a JSON value serializes")
}

/// The kubelet's own ports.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KubeletPorts {
    pub server: u16,
    pub healthz: u16,
}

/// The KubeletConfiguration: cgroupfs without QoS cgroups or allocatable
/// enforcement (the host's cgroups are not the kubelet's), swap allowed, its
/// own ports and Pod logs; clients of its API authenticated by the
/// clusters' CA and then allowed (the API server's `kubectl logs`); images
/// never garbage-collected (they are imported, not pulled); registered with
/// the real-node taint.
pub(crate) fn kubelet_yaml(layout: &Layout, ports: KubeletPorts, client_ca: &Path) -> String {
    let config = json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        // The kubelet's API on the node's own address, not every address
        // of the host.
        "address": layout.gateway(),
        "port": ports.server,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": ports.healthz,
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": false,
        "enforceNodeAllocatable": [],
        "failSwapOn": false,
        "containerRuntimeEndpoint": format!("unix://{}", layout.containerd_socket().display()),
        "imageServiceEndpoint": format!("unix://{}", layout.containerd_socket().display()),
        "podLogsDir": layout.pod_logs,
        "authentication": {
            "anonymous": {"enabled": false},
            "webhook": {"enabled": false},
            "x509": {"clientCAFile": client_ca},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "serverTLSBootstrap": false,
        "rotateCertificates": false,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "registerWithTaints": [
            {"key": REAL_NODE_TAINT, "value": "true", "effect": "NoSchedule"},
        ],
    });
    serde_yaml_ng::to_string(&config).expect("a JSON value serializes as YAML")
}

/// The kubelet's kubeconfig: the cluster's API server, its CA, and the
/// node's client certificate.
pub(crate) fn kubelet_kubeconfig(server: &str, ca: &Path, cert: &Path, key: &Path) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: kubelet
  user:
    client-certificate: {cert}
    client-key: {key}
contexts:
- name: kubelet
  context:
    cluster: cluster
    user: kubelet
current-context: kubelet
",
        ca = ca.display(),
        cert = cert.display(),
        key = key.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::node::layout::tests::layout;

    #[test]
    fn containerd_runs_runc_on_cgroupfs_with_the_pause_image_and_clamped_oom_scores() {
        let paths = RuntimePaths {
            runc: "/cache/bin/runc".into(),
            cni_bin: "/cache/cni".into(),
        };
        let toml = containerd_toml(&layout(2), &paths, "overlayfs");
        for expected in [
            "version = 3",
            r#"address = "/run/jobrelay-nodes/node-2/containerd.sock""#,
            r#"sandbox = "jobrelay.test/pause:1""#,
            "restrict_oom_score_adj = true",
            "netns_mounts_under_state_dir = true",
            r#"BinaryName = "/cache/bin/runc""#,
            "SystemdCgroup = false",
            r#"bin_dirs = ["/cache/cni"]"#,
            r#"conf_dir = "/run/jobrelay-nodes/node-2/cni/net.d""#,
            r#"snapshotter = "overlayfs""#,
        ] {
            assert!(toml.contains(expected), "missing {expected:?} in\n{toml}");
        }
    }

    #[test]
    fn the_cni_network_is_the_nodes_own_bridge_and_subnet() {
        let conf: serde_json::Value = serde_json::from_str(&cni_conflist(&layout(3))).unwrap();
        assert_eq!(conf["name"], "jobrelay-node-3");
        let bridge = &conf["plugins"][0];
        assert_eq!(bridge["bridge"], "jrnode3");
        assert_eq!(bridge["ipMasq"], false);
        assert_eq!(bridge["ipam"]["ranges"][0][0]["subnet"], "10.244.3.0/24");
        assert_eq!(conf["plugins"][1]["type"], "portmap");
    }

    #[test]
    fn the_kubelet_is_tainted_on_its_own_ports_and_leaves_host_cgroups_alone() {
        let ports = KubeletPorts {
            server: 20250,
            healthz: 20248,
        };
        let text = kubelet_yaml(&layout(0), ports, Path::new("/pki/ca.crt"));
        let config: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(config["port"], 20250);
        assert_eq!(config["healthzPort"], 20248);
        assert_eq!(config["readOnlyPort"], 0);
        assert_eq!(config["cgroupDriver"], "cgroupfs");
        assert_eq!(config["cgroupsPerQOS"], false);
        assert_eq!(config["enforceNodeAllocatable"], json!([]));
        assert_eq!(config["failSwapOn"], false);
        assert_eq!(config["podLogsDir"], "/state/worker-1/pod-logs");
        assert_eq!(
            config["containerRuntimeEndpoint"],
            "unix:///run/jobrelay-nodes/node-0/containerd.sock"
        );
        assert_eq!(
            config["registerWithTaints"][0],
            json!({"key": REAL_NODE_TAINT, "value": "true", "effect": "NoSchedule"})
        );
    }
}
