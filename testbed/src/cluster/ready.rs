//! When a test cluster is ready: its API server answers `/readyz`, and Pods
//! can run on its fake Node (annotated for kwok, which manages only such
//! Nodes).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::{Api, PostParams};

use crate::cluster::{ClusterInfo, Error, KWOK_NODE_ANNOTATION, NODE, START_TIMEOUT};
use crate::wait::{self, Seen};

/// Waits until the API server of `cluster` says it is ready.
pub(crate) async fn wait_api_ready(cluster: &ClusterInfo) -> Result<(), Error> {
    let client = cluster.client().await?;
    wait::try_until(
        format!("{} kube-apiserver /readyz", cluster.name),
        START_TIMEOUT,
        || {
            let client = client.clone();
            async move {
                let request = http::Request::get("/readyz")
                    .body(Vec::new())
                    .expect("static request");
                match client.request_text(request).await {
                    Ok(body) if body.trim() == "ok" => Seen::Ready(()),
                    Ok(body) => Seen::Waiting(body),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            }
        },
    )
    .await?;
    Ok(())
}

/// Creates the fake Node and waits until Pods can run: Node Ready and the
/// `default` ServiceAccount present.
pub(crate) async fn wait_workable(cluster: &ClusterInfo) -> Result<(), Error> {
    let client = cluster.client().await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "labels": {"type": "kwok", "kubernetes.io/hostname": NODE},
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
        },
    }))
    .expect("static node");
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(source) => {
            let cluster = cluster.name.clone();
            return Err(Error::Api { cluster, source });
        }
    }
    wait::try_until(
        format!("{} node {NODE} Ready", cluster.name),
        START_TIMEOUT,
        || {
            let nodes = nodes.clone();
            async move {
                match nodes.get(NODE).await {
                    Ok(node) => {
                        let conditions: BTreeMap<String, String> = node
                            .status
                            .and_then(|s| s.conditions)
                            .unwrap_or_default()
                            .into_iter()
                            .map(|c| (c.type_, c.status))
                            .collect();
                        if conditions.get("Ready").map(String::as_str) == Some("True") {
                            Seen::Ready(())
                        } else {
                            Seen::Waiting(format!("conditions {conditions:?}"))
                        }
                    }
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            }
        },
    )
    .await?;
    default_service_account(&client, "default", START_TIMEOUT).await?;
    Ok(())
}

/// Waits until the namespace has its `default` ServiceAccount, without which
/// no Pod can be created there.
pub async fn default_service_account(
    client: &kube::Client,
    namespace: &str,
    timeout: Duration,
) -> Result<(), wait::Timeout> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    wait::try_until(
        format!("ServiceAccount {namespace}/default"),
        timeout,
        || {
            let accounts = accounts.clone();
            async move {
                match accounts.get_opt("default").await {
                    Ok(Some(_)) => Seen::Ready(()),
                    Ok(None) => Seen::Waiting("not created yet".into()),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            }
        },
    )
    .await
}
