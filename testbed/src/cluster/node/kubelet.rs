//! A real node's kubelet: its client certificate and configuration, the
//! node's bridge, started in the node's mount namespace, allowed to act as
//! its Node, and waited for until the Node is Ready.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};

use crate::certs::{self, Pki};
use crate::cluster::ClusterInfo;
use crate::wait::{self, Seen};

use super::config::{self, KubeletPorts, REAL_NODE_LABEL};
use super::layout::Layout;
use super::runtime::NodeRuntime;
use super::{Error, RealNode, alive, free_port, namespace, run, write};

/// How long a node gets to register and turn Ready.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

impl RealNode {
    pub(super) async fn start_kubelet(
        &mut self,
        runtime: &NodeRuntime,
        cluster: &ClusterInfo,
        pki: &Pki,
    ) -> Result<(), Error> {
        let layout = self.layout.clone();
        let (cert, key) =
            certs::node_client(pki, &layout.name)?.write(&layout.pki(), "kubelet-client")?;
        let kubeconfig = layout.pki().join("kubelet.kubeconfig");
        write(
            &kubeconfig,
            &config::kubelet_kubeconfig(&cluster.server, &pki.ca_cert, &cert, &key),
        )?;
        let ports = KubeletPorts {
            server: free_port()?,
            healthz: free_port()?,
        };
        write(
            &layout.kubelet_config(),
            &config::kubelet_yaml(&layout, ports, &pki.ca_cert),
        )?;

        let client = cluster.client().await.map_err(|e| Error::Client {
            cluster: cluster.name.clone(),
            message: e.to_string(),
        })?;
        allow_node(&client, &cluster.name, &layout.name).await?;

        // The kubelet takes an address of the host's as the node's: the
        // bridge's, made now (CNI's bridge plugin keeps what it finds).
        bridge_up(&layout)?;
        let mut command = Command::new(runtime.binary("kubelet"));
        command.args([
            format!("--node-ip={}", layout.gateway()),
            format!("--config={}", layout.kubelet_config().display()),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--root-dir={}", layout.kubelet_root().display()),
            format!("--cert-dir={}", layout.pki().display()),
            format!("--hostname-override={}", layout.name),
            format!("--node-labels={REAL_NODE_LABEL}=true"),
            "--v=2".into(),
        ]);
        let containerd = self.pid("containerd");
        namespace::join(&mut command, containerd as u32)
            .map_err(|e| Error::Io("joining the node's mount namespace".into(), e))?;
        self.kubelet = Some(self.spawn("kubelet", command)?);

        let pid = self.pid("kubelet");
        let nodes: Api<Node> = Api::all(client);
        let name = layout.name.clone();
        wait::try_until(
            format!("{} node {name} Ready", cluster.name),
            READY_TIMEOUT,
            || {
                let nodes = nodes.clone();
                let name = name.clone();
                let exited = !alive(pid) || !alive(containerd);
                async move {
                    if exited {
                        return Seen::Ready(());
                    }
                    match nodes.get_opt(&name).await {
                        Ok(Some(node)) if ready(&node) => Seen::Ready(()),
                        Ok(Some(node)) => Seen::Waiting(format!(
                            "conditions {:?}",
                            node.status
                                .and_then(|s| s.conditions)
                                .unwrap_or_default()
                                .into_iter()
                                .map(|c| format!(
                                    "{}={} ({})",
                                    c.type_,
                                    c.status,
                                    c.message.unwrap_or_default()
                                ))
                                .collect::<Vec<_>>()
                        )),
                        Ok(None) => Seen::Waiting("not registered yet".into()),
                        Err(e) => Seen::Waiting(e.to_string()),
                    }
                }
            },
        )
        .await?;
        for (what, pid) in [("kubelet", pid), ("containerd", containerd)] {
            if !alive(pid) {
                let log = self.log_path(what);
                return Err(self.exited_error(what, &log));
            }
        }
        Ok(())
    }
}

/// Lets the kubelet of `node` act as one: the `system:node` ClusterRole for
/// user `system:node:<node>` (the test API servers authorize with RBAC only).
async fn allow_node(client: &kube::Client, cluster: &str, node: &str) -> Result<(), Error> {
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("jobrelay:real-node:{node}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": format!("system:node:{node}")}],
    }))
    .expect("static binding");
    match bindings.create(&PostParams::default(), &binding).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(source) => Err(Error::Api {
            cluster: cluster.into(),
            source,
        }),
    }
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Creates the node's bridge with its gateway address, up, unless it is.
fn bridge_up(layout: &Layout) -> Result<(), Error> {
    let bridge = layout.bridge();
    let address = format!("{}/24", layout.gateway());
    if !Path::new("/sys/class/net").join(&bridge).exists() {
        run(Command::new("ip").args(["link", "add", &bridge, "type", "bridge"]))?;
    }
    let shown = Command::new("ip")
        .args(["-4", "-o", "addr", "show", "dev", &bridge])
        .output()
        .map_err(|e| Error::Io(format!("ip addr show dev {bridge}"), e))?;
    if !String::from_utf8_lossy(&shown.stdout).contains(&address) {
        run(Command::new("ip").args(["addr", "add", &address, "dev", &bridge]))?;
    }
    run(Command::new("ip").args(["link", "set", &bridge, "up"]))
}
