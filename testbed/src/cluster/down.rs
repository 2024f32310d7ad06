//! A kwok Node that stops answering, as a node whose kubelet died or was
//! cut off: its Lease taken from kwok, which then leaves the Node and its
//! Pods alone (a Pod being deleted stays Terminating), and its Ready
//! condition `Unknown`, as the node lifecycle controller would set it (the
//! test clusters do not run that controller). Deleting the Node (for
//! example with `pools::remove_pool`) ends it; the Pod garbage collector
//! then removes its Pods.

use std::cell::Cell;
use std::time::{Duration, Instant};

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
/// How long the Node must stay `Unknown` before it counts as down: longer
/// than kwok's Lease renewal interval (10 s with the testbed's 40 s
/// Lease), so kwok has tried to renew, found the Lease another's, and
/// left the Node and its Pods alone.
const STAYS: Duration = Duration::from_secs(15);

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
    let since: Cell<Option<Instant>> = Cell::new(None);
    wait::try_until(
        format!("node {name} Ready Unknown, kwok gone from it"),
        NODES_TIMEOUT,
        || {
            let nodes = nodes.clone();
            let since = &since;
            async move {
                let ready = match nodes.get(name).await {
                    Ok(node) => ready_status(&node),
                    Err(e) => return Seen::Waiting(e.to_string()),
                };
                if ready.as_deref() == Some("Unknown") {
                    let unknown_since = since.get().unwrap_or_else(Instant::now);
                    since.set(Some(unknown_since));
                    let stayed = unknown_since.elapsed();
                    return match stayed >= STAYS {
                        true => Seen::Ready(()),
                        false => Seen::Waiting(format!("Unknown for {stayed:?}")),
                    };
                }
                since.set(None);
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
