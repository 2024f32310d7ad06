//! Proof that the test kit's real node is a node: a kubelet and a containerd
//! started for worker-1 register a Ready, tainted Node beside kwok's fake
//! one; Pods from the kit's workload image run as real containers under a
//! restricted security context (uid 65532, read-only root, no capabilities,
//! RuntimeDefault seccomp) and end with their real exit codes; a
//! `hostNetwork` Pod reaches the API server at its loopback address with
//! its ServiceAccount token mounted; a Deployment behind a
//! PodDisruptionBudget and a Service is rolled out (the kube-controller-
//! manager's deployment, replicaset, disruption and endpointslice
//! controllers); and once the clusters stop, no process, mount, bridge,
//! cgroup or folder of the node is left on the host.

use std::process::Command;
use std::time::{Duration, Instant};

use jobrelay_testbed::cluster::node::{
    REAL_NODE, REAL_NODE_LABEL, REAL_NODE_TAINT, RealNodeInfo, WORKLOAD_IMAGE, node_runtime,
};
use jobrelay_testbed::cluster::supervisor::Supervisor;
use jobrelay_testbed::cluster::{ClusterInfo, NODE};
use jobrelay_testbed::go::controlplane::seconds;
use jobrelay_testbed::kit;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

#[path = "real_node/pod.rs"]
mod pod;
use pod::{container_log, exit_code, finished, phase, workload_pod};

const TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn a_real_node_runs_pods_as_containers_and_leaves_nothing_behind() {
    let state_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/jobrelay")
        .join(format!("real-node-{}", std::process::id()));
    let started = Instant::now();
    let mut command = Command::new(kit::supervisor_binary());
    command.arg("--real-node=worker-1");
    let supervisor = Supervisor::start(command, &state_dir, 1, false)
        .unwrap_or_else(|e| panic!("starting the clusters: {e:#}"));
    eprintln!(
        "manager and worker-1 (with a real node) up in {}",
        seconds(started.elapsed())
    );
    let set = supervisor.set().clone();
    let worker = &set.workers()[0];
    assert!(set.manager().real_node().is_none(), "only worker-1 asked");
    let node = worker
        .real_node()
        .cloned()
        .expect("worker-1 has a real node");
    let client = kit::client(worker).await;

    node_is_ready_tainted_and_labelled(&client, &node).await;
    fake_node_still_kwoks(&client).await;
    // Importing an archive again from the test process works as at start.
    let runtime = node_runtime().expect("the node runtime is built");
    node.import_image(&runtime.workload_image())
        .expect("import the workload image");

    let ns = kit::namespace(&client, "real-node").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods_end_with_their_real_exit_codes(&pods, &node).await;
    a_host_network_pod_reaches_the_api_server(&pods, worker).await;
    a_deployment_rolls_out_behind_a_budget_and_a_service(&client, &ns).await;

    let containers = node.containers();
    assert!(
        containers.len() >= 8,
        "four Pods ran, each a sandbox and a container: {containers:?}"
    );
    supervisor.stop().expect("stop the clusters");
    let left = node.leftovers(&containers);
    assert!(
        left.is_empty(),
        "after the clusters stopped, the real node left: {left:#?}"
    );
    eprintln!("the whole test took {}", seconds(started.elapsed()));
}

async fn node_is_ready_tainted_and_labelled(client: &kube::Client, info: &RealNodeInfo) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes
        .get(REAL_NODE)
        .await
        .expect("the real node registered");
    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(REAL_NODE_LABEL).map(String::as_str),
        Some("true")
    );
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    assert!(
        taints
            .iter()
            .any(|t| t.key == REAL_NODE_TAINT && t.effect == "NoSchedule"),
        "taints {taints:?}"
    );
    let status = node.status.clone().unwrap_or_default();
    let ready = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    assert!(ready, "the real node is Ready");
    let info_runtime = status
        .node_info
        .map(|i| (i.kubelet_version, i.container_runtime_version))
        .unwrap_or_default();
    assert_eq!(
        info_runtime.0,
        jobrelay_testbed::go::controlplane::KUBERNETES_VERSION
    );
    assert!(
        info_runtime.1.starts_with("containerd://2."),
        "{info_runtime:?}"
    );
    let annotations = node.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key("kwok.x-k8s.io/node"),
        "kwok must not take the real node"
    );
    eprintln!(
        "{REAL_NODE} Ready in slot {}, snapshotter {}",
        info.slot, info.snapshotter
    );
}

async fn fake_node_still_kwoks(client: &kube::Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    let fake = nodes.get(NODE).await.expect("kwok's node");
    let ready = fake
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    assert!(ready, "kwok still plays {NODE}");
}

async fn pods_end_with_their_real_exit_codes(pods: &Api<Pod>, node: &RealNodeInfo) {
    let token = "/var/run/secrets/kubernetes.io/serviceaccount/token".to_string();
    let ok = workload_pod(
        "exits-0",
        &[
            "-sleep=1".into(),
            "-exit=0".into(),
            format!("-require-file={token}"),
            "-read-only-root".into(),
        ],
        false,
        &[],
    );
    let three = workload_pod(
        "exits-3",
        &["-sleep=1".into(), "-exit=3".into()],
        false,
        &[],
    );
    for pod in [ok, three] {
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create Pod");
    }

    let ok = finished(pods, "exits-0").await;
    let log = container_log(node, &ok);
    assert_eq!(phase(&ok), "Succeeded", "{:?}\nlog: {log}", ok.status);
    assert_eq!(exit_code(&ok), Some(0));
    assert_eq!(
        ok.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .as_deref(),
        Some(REAL_NODE)
    );
    for expected in [
        "uid=65532 gid=65532",
        "token has",
        "the root filesystem is read-only",
    ] {
        assert!(
            log.contains(expected),
            "{expected:?} not in the log:\n{log}"
        );
    }
    let pod_ip = ok
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default();
    assert!(
        pod_ip.starts_with(&format!("10.244.{}.", node.slot)),
        "a bridge address from the node's subnet, got {pod_ip:?}"
    );

    let three = finished(pods, "exits-3").await;
    assert_eq!(phase(&three), "Failed", "{:?}", three.status);
    assert_eq!(exit_code(&three), Some(3), "{:?}", three.status);
}

async fn a_host_network_pod_reaches_the_api_server(pods: &Api<Pod>, worker: &ClusterInfo) {
    let address = worker
        .server
        .trim_start_matches("https://")
        .rsplit_once(':')
        .map(|(host, port)| (host.to_string(), port.to_string()))
        .expect("host:port");
    let pod = workload_pod(
        "host-network",
        &[
            "-dial=$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)".into(),
            "-require-file=/var/run/secrets/kubernetes.io/serviceaccount/token".into(),
        ],
        true,
        &[
            ("KUBERNETES_SERVICE_HOST", address.0.clone()),
            ("KUBERNETES_SERVICE_PORT", address.1.clone()),
        ],
    );
    let created = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("create Pod");
    let mounts: Vec<String> = created
        .spec
        .as_ref()
        .and_then(|s| s.containers.first()?.volume_mounts.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.mount_path)
        .collect();
    assert!(
        mounts.contains(&"/var/run/secrets/kubernetes.io/serviceaccount".to_string()),
        "the ServiceAccount token is mounted: {mounts:?}"
    );
    let done = finished(pods, "host-network").await;
    assert_eq!(
        phase(&done),
        "Succeeded",
        "dialed {}:{} from the host network: {:?}",
        address.0,
        address.1,
        done.status
    );
}

async fn a_deployment_rolls_out_behind_a_budget_and_a_service(client: &kube::Client, ns: &str) {
    let labels = json!({"app": "sleeper"});
    let pod = workload_pod("unused", &["-sleep=1h".into()], false, &[]);
    let mut spec = serde_json::to_value(pod.spec).expect("a Pod spec is JSON");
    spec["restartPolicy"] = json!("Always");
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "sleeper"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }))
    .expect("a valid Deployment");
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "sleeper"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
    }))
    .expect("a valid PodDisruptionBudget");
    let service: Service = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "sleeper"},
        "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 8080}]},
    }))
    .expect("a valid Service");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    let create = PostParams::default();
    deployments
        .create(&create, &deployment)
        .await
        .expect("create Deployment");
    budgets
        .create(&create, &budget)
        .await
        .expect("create PodDisruptionBudget");
    services
        .create(&create, &service)
        .await
        .expect("create Service");

    wait::until("Deployment sleeper available", TIMEOUT, || async {
        match deployments.get("sleeper").await {
            Ok(d) => {
                let status = d.status.unwrap_or_default();
                match status.available_replicas {
                    Some(1) => Seen::Ready(()),
                    _ => Seen::Waiting(format!("{status:?}")),
                }
            }
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    wait::until(
        "PodDisruptionBudget sleeper counting its Pod healthy",
        TIMEOUT,
        || async {
            match budgets.get("sleeper").await {
                Ok(b) => {
                    let status = b.status.unwrap_or_default();
                    if status.current_healthy == 1 && status.desired_healthy == 1 {
                        Seen::Ready(())
                    } else {
                        Seen::Waiting(format!("{status:?}"))
                    }
                }
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    wait::until(
        "an EndpointSlice of Service sleeper with its Pod ready",
        TIMEOUT,
        || async {
            let listed = slices
                .list(&ListParams::default().labels("kubernetes.io/service-name=sleeper"))
                .await;
            match listed {
                Ok(list) => {
                    let ready: Vec<String> = list
                        .items
                        .iter()
                        .flat_map(|s| s.endpoints.iter())
                        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                        .flat_map(|e| e.addresses.clone())
                        .collect();
                    if ready.len() == 1 {
                        Seen::Ready(())
                    } else {
                        Seen::Waiting(format!("ready addresses {ready:?}"))
                    }
                }
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
}
