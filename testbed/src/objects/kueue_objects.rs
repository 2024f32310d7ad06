//! Kueue's objects in a test: applying them (v1beta2, server-side), the
//! ClusterQueue-and-LocalQueue pair a scenario queues in, jobrelay's
//! AdmissionCheck, and where each Workload stands.

use anyhow::Context as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

use crate::wait::{self, Seen};

/// Field manager of what the test bed applies for Kueue.
const FIELD_MANAGER: &str = "jobrelay-e2e-kueue";
/// How long a ClusterQueue gets to become active.
const ACTIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(90);

/// The ResourceFlavor [`queue`] uses.
pub const FLAVOR: &str = "default";
/// The LocalQueue [`queue`] makes in its namespace.
pub const LOCAL_QUEUE: &str = "queue";

/// Kueue's objects of `kind` (v1beta2), in `namespace` or cluster-wide.
pub fn api(client: &kube::Client, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let lower = kind.to_lowercase();
    let plural = match lower.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None if lower.ends_with('s') => format!("{lower}es"),
        None => format!("{lower}s"),
    };
    let gvk = GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &plural);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// Applies one of Kueue's objects (server-side); `body` needs no
/// `apiVersion` or `kind`.
pub async fn apply(
    client: &kube::Client,
    kind: &str,
    namespace: Option<&str>,
    mut body: Value,
) -> anyhow::Result<()> {
    body["apiVersion"] = json!("kueue.x-k8s.io/v1beta2");
    body["kind"] = json!(kind);
    let name = body["metadata"]["name"]
        .as_str()
        .context("a Kueue object without a name")?
        .to_string();
    api(client, kind, namespace)
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .with_context(|| format!("applying {kind} {name}"))?;
    Ok(())
}

/// The ResourceFlavor [`FLAVOR`] and an AdmissionCheck `check` answered by
/// jobrelay, with `parameters` if given.
pub async fn admission_check(
    client: &kube::Client,
    check: &str,
    parameters: Option<Value>,
) -> anyhow::Result<()> {
    flavor(client).await?;
    let mut body = json!({
        "metadata": {"name": check},
        "spec": {"controllerName": jobrelay_proto::wire::MANAGED_BY},
    });
    if let Some(parameters) = parameters {
        body["spec"]["parameters"] = parameters;
    }
    apply(client, "AdmissionCheck", None, body).await
}

/// A ResourceFlavor [`FLAVOR`] (with no checks: the queue of a worker
/// cluster's own Kueue).
pub async fn flavor(client: &kube::Client) -> anyhow::Result<()> {
    apply(
        client,
        "ResourceFlavor",
        None,
        json!({"metadata": {"name": FLAVOR}}),
    )
    .await
}

/// A ClusterQueue `name` for `namespace` only, with `cpu` CPUs of quota in
/// [`FLAVOR`], lower priorities preempted, behind the AdmissionCheck
/// `check`; and the LocalQueue [`LOCAL_QUEUE`] in `namespace` pointing at
/// it. Waits until the ClusterQueue is active.
pub async fn queue(
    client: &kube::Client,
    name: &str,
    namespace: &str,
    cpu: u32,
    check: &str,
) -> anyhow::Result<()> {
    queue_named(client, name, namespace, LOCAL_QUEUE, cpu, &[check]).await
}

/// A ClusterQueue `name` with `cpu` CPUs of quota and the admission
/// `checks`, with LocalQueue `local_queue` in `namespace` pointing at it;
/// waits until the ClusterQueue is active.
pub async fn queue_named(
    client: &kube::Client,
    name: &str,
    namespace: &str,
    local_queue: &str,
    cpu: u32,
    checks: &[&str],
) -> anyhow::Result<()> {
    let mut cluster_queue = json!({
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": cpu.to_string()}]},
            ]}],
            "preemption": {"withinClusterQueue": "LowerPriority"},
        },
    });
    if !checks.is_empty() {
        let checks: Vec<Value> = checks.iter().map(|c| json!({"name": c})).collect();
        cluster_queue["spec"]["admissionChecksStrategy"] = json!({"admissionChecks": checks});
    }
    apply(client, "ClusterQueue", None, cluster_queue).await?;
    apply(
        client,
        "LocalQueue",
        Some(namespace),
        json!({
            "metadata": {"name": local_queue, "namespace": namespace},
            "spec": {"clusterQueue": name},
        }),
    )
    .await?;
    let queues = api(client, "ClusterQueue", None);
    wait::try_until(
        format!("ClusterQueue {name} active"),
        ACTIVE_TIMEOUT,
        || async {
            match queues.get(name).await {
                Ok(q) if condition_true(&q.data, "Active") => Seen::Ready(()),
                Ok(q) => Seen::Waiting(format!("{}", q.data["status"])),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await?;
    Ok(())
}

/// Where each Workload of `namespace` stands, by the name of the Job that
/// owns it: `queued`, `reserved` (quota reserved, checks pending),
/// `admitted`, `evicted` or `finished`.
pub async fn workload_states(
    client: &kube::Client,
    namespace: &str,
) -> anyhow::Result<std::collections::BTreeMap<String, &'static str>> {
    let workloads = api(client, "Workload", Some(namespace));
    let mut states = std::collections::BTreeMap::new();
    for workload in workloads.list(&Default::default()).await? {
        let Some(owner) = workload
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.kind == "Job")
        else {
            continue;
        };
        let state = ["Finished", "Evicted", "Admitted", "QuotaReserved"]
            .into_iter()
            .find(|c| condition_true(&workload.data, c))
            .map_or("queued", |c| match c {
                "Finished" => "finished",
                "Evicted" => "evicted",
                "Admitted" => "admitted",
                _ => "reserved",
            });
        states.insert(owner.name.clone(), state);
    }
    Ok(states)
}

/// Whether an object's `status.conditions` has `type_` true.
pub fn condition_true(object: &Value, type_: &str) -> bool {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == type_ && c["status"] == "True")
}
