//! A kwok Node that stops answering, as a node whose kubelet died or was
//! cut off: its Lease taken from kwok, which then leaves the Node and its
//! Pods alone (a Pod being deleted stays Terminating), and its Ready
//! condition `Unknown`, as the node lifecycle controller would set it (the
//! test clusters do not run that controller). Deleting the Node (for
//! example with `pools::remove_pool`) ends it; the Pod garbage collector
//! then removes its Pods.

use std::cell::Cell;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::cluster::pools::{Error, NODES_TIMEOUT};
use crate::wait::{self, Seen};

/// Where node Leases live.
const NODE_LEASES: &str = "kube-node-lease";
/// Polls in a row the Node must be seen `Unknown` before it counts as down:
/// a renewal kwok had under way is then over.
const IN_A_ROW: u32 = 3;

/// Makes Node `name` stop answering; returns once its Ready condition has
/// stayed `Unknown`.
pub async fn stop_answering(client: &kube::Client, name: &str) -> Result<(), Error> {
    let api_err = |source| Error::Api {
        node: name.to_string(),
        source,
    };
    let leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASES);
    let lease = json!({"spec": {
        "holderIdentity": "jobrelay-e2e",
        "leaseDurationSeconds": 3600,
        "renewTime": MicroTime(Timestamp::now()),
    }});
    leases
        .patch(name, &PatchParams::default(), &Patch::Merge(&lease))
        .await
        .map_err(api_err)?;
    let nodes: Api<Node> = Api::all(client.clone());
    let seen = Cell::new(0);
    wait::try_until(
        format!("node {name} Ready Unknown, kwok gone from it"),
        NODES_TIMEOUT,
        || {
            let nodes = nodes.clone();
            let seen = &seen;
            async move {
                let ready = match nodes.get(name).await {
                    Ok(node) => ready_status(&node),
                    Err(e) => return Seen::Waiting(e.to_string()),
                };
                if ready.as_deref() == Some("Unknown") {
                    seen.set(seen.get() + 1);
                    return match seen.get() >= IN_A_ROW {
                        true => Seen::Ready(()),
                        false => Seen::Waiting(format!("Unknown {} times in a row", seen.get())),
                    };
                }
                seen.set(0);
                let now = Time(Timestamp::now());
                let status = json!({"status": {"conditions": [{
                    "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                    "message": "Kubelet stopped posting node status.",
                    "lastHeartbeatTime": now, "lastTransitionTime": now,
                }]}});
                match nodes
                    .patch_status(name, &PatchParams::default(), &Patch::Strategic(&status))
                    .await
                {
                    Ok(_) => Seen::Waiting(format!("Ready was {ready:?}; set Unknown")),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            }
        },
    )
    .await?;
    Ok(())
}

fn ready_status(node: &Node) -> Option<String> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions.iter().find(|c| c.type_ == "Ready")?;
    Some(ready.status.clone())
}
