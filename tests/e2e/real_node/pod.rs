//! The Pods the real node runs, and what of them a test reads: phase, waiting
//! reasons, exit code, and the container's log from the kubelet's files.

use super::*;

/// A Pod for the real node running `/workload` with `args`, restricted.
pub(crate) fn workload_pod(
    name: &str,
    args: &[String],
    host_network: bool,
    env: &[(&str, String)],
) -> Pod {
    let env: Vec<serde_json::Value> = env
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "hostNetwork": host_network,
            "nodeSelector": {REAL_NODE_LABEL: "true"},
            "tolerations": [{"key": REAL_NODE_TAINT, "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 2,
            "securityContext": {
                "runAsNonRoot": true,
                "runAsUser": 65532,
                "runAsGroup": 65532,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [{
                "name": "workload",
                "image": WORKLOAD_IMAGE,
                "imagePullPolicy": "Never",
                "args": args,
                "env": env,
                "securityContext": {
                    "runAsUser": 65532,
                    "readOnlyRootFilesystem": true,
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]},
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
            }],
        },
    }))
    .expect("a valid Pod")
}

/// Waits until Pod `name` finished and returns it.
pub(crate) async fn finished(pods: &Api<Pod>, name: &str) -> Pod {
    wait::until(format!("Pod {name} finished"), TIMEOUT, || async move {
        match pods.get(name).await {
            Ok(pod) => {
                let phase = phase(&pod);
                if phase == "Succeeded" || phase == "Failed" {
                    Seen::Ready(pod)
                } else {
                    Seen::Waiting(format!("phase {phase}, {:?}", waiting_reasons(&pod)))
                }
            }
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await
}

pub(crate) fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

fn waiting_reasons(pod: &Pod) -> Vec<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.state?.waiting)
        .map(|w| {
            format!(
                "{}: {}",
                w.reason.unwrap_or_default(),
                w.message.unwrap_or_default()
            )
        })
        .collect()
}

/// The exit code the kubelet recorded for the Pod's container.
pub(crate) fn exit_code(pod: &Pod) -> Option<i32> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

/// What the container printed, from the kubelet's log file.
pub(crate) fn container_log(node: &RealNodeInfo, pod: &Pod) -> String {
    let meta = &pod.metadata;
    let dir = node.pod_logs.join(format!(
        "{}_{}_{}",
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
        meta.uid.clone().unwrap_or_default()
    ));
    std::fs::read_to_string(dir.join("workload").join("0.log"))
        .unwrap_or_else(|e| format!("(no log in {}: {e})", dir.display()))
}
