//! A ResourceFlavor is quota on the manager: a Job admitted in a flavor
//! with node labels and a toleration gets them from Kueue on the manager
//! cluster, and its mirror carries neither — before admission (created
//! suspended) nor after (the revision Kueue's unsuspend sent).

use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_e2e::scenario::{worker_pods_of, workload_of};
use jobrelay_manager::kueue::types::{CheckState, Workload};
use jobrelay_proto::wire::REVISION_ANNOTATION;
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::kueue_objects::{self, LOCAL_QUEUE};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PodSpec;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::{CHECK, check_shows, queued_job, setup};

/// The flavor's node label (every test node carries it) and toleration.
const LABEL: (&str, &str) = ("type", "kwok");
const TOLERATION: &str = "jobrelay.dev/pool";

/// A ClusterQueue named for the scenario with one CPU of quota in `flavor`
/// behind `checks`, and the LocalQueue in its namespace.
pub(super) async fn queue_in(
    client: &kube::Client,
    s: &Scenario,
    flavor: &str,
    checks: &[&str],
) -> anyhow::Result<()> {
    let checks: Vec<Value> = checks.iter().map(|c| json!({"name": c})).collect();
    let cluster_queue = json!({
        "metadata": {"name": s.ns},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": s.ns}},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": "1"}]},
            ]}],
            "admissionChecksStrategy": {"admissionChecks": checks},
        },
    });
    kueue_objects::apply(client, "ClusterQueue", None, cluster_queue).await?;
    let local_queue = json!({
        "metadata": {"name": LOCAL_QUEUE, "namespace": s.ns},
        "spec": {"clusterQueue": s.ns},
    });
    kueue_objects::apply(client, "LocalQueue", Some(&s.ns), local_queue).await
}

/// The flavor's constraints in a pod spec: (node label, toleration).
fn constraints(pod: &PodSpec) -> (bool, bool) {
    let label = pod
        .node_selector
        .as_ref()
        .and_then(|n| n.get(LABEL.0))
        .is_some_and(|v| v == LABEL.1);
    let toleration = pod
        .tolerations
        .iter()
        .flatten()
        .any(|t| t.key.as_deref() == Some(TOLERATION));
    (label, toleration)
}

fn pod_spec(job: &Job) -> PodSpec {
    job.spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_mirror_lacks_the_flavors_constraints_before_and_after_kueue_admits() {
    let (clusters, relay) = setup().await;
    let s = Scenario::new(clusters, relay, "flavored").await;
    let client = kit::client(clusters.manager()).await;
    // A flavor with a node label and a toleration, and a second check whose
    // controller is this test: the Workload is held until the test lets it go.
    let (flavor, gate) = (format!("pool-{}", s.ns), format!("gate-{}", s.ns));
    let setup = async {
        let flavor_spec = json!({
            "metadata": {"name": flavor},
            "spec": {
                "nodeLabels": {(LABEL.0): LABEL.1},
                "tolerations": [{"key": TOLERATION, "operator": "Exists", "effect": "NoSchedule"}],
            },
        });
        kueue_objects::apply(&client, "ResourceFlavor", None, flavor_spec).await?;
        let gate_spec = json!({"metadata": {"name": gate}, "spec": {"controllerName": "e2e.jobrelay.dev/gate"}});
        kueue_objects::apply(&client, "AdmissionCheck", None, gate_spec).await?;
        let active = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "status": {"conditions": [{
            "type": "Active", "status": "True", "reason": "Active", "message": "the test decides",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]}});
        kueue_objects::api(&client, "AdmissionCheck", None)
            .patch_status(
                &gate,
                &PatchParams::apply("e2e-gate").force(),
                &Patch::Apply(&active),
            )
            .await?;
        queue_in(&client, &s, &flavor, &[CHECK, &gate]).await
    };
    setup.await.unwrap_or_else(|e| panic!("{e:#}"));

    // Long enough to read the running mirror: a finished one goes at once.
    let uid = s.create(queued_job(&s, "flavored").run_for("10s")).await;
    let worker = s.assigned_worker("flavored").await;
    let mirrors: Api<Job> = s.worker_api(&worker.name).await;
    let workloads: Api<Workload> = Api::namespaced(client.clone(), &s.ns);
    let workload = workload_of(&s, "flavored").await.name_any();
    // Ready while the test's gate holds the Workload.
    check_shows(&workloads, (&workload, CHECK), "Ready", |c| {
        c.state == Some(CheckState::Ready)
    })
    .await;
    let mirror = mirrors
        .get("flavored")
        .await
        .expect("the mirror exists before admission");
    assert_eq!(
        mirror.spec.as_ref().and_then(|s| s.suspend),
        Some(true),
        "created suspended"
    );
    assert_eq!(
        constraints(&pod_spec(&mirror)),
        (false, false),
        "before admission the mirror has neither the flavor's node label nor its toleration"
    );
    assert_eq!(
        worker_pods_of(&s, &uid)
            .await
            .expect("count the worker Pods"),
        0,
        "nothing runs before admission"
    );
    let manager_job = s.jobs.get("flavored").await.expect("get");
    assert_eq!(manager_job.spec.and_then(|sp| sp.suspend), Some(true));

    // The gate opens: Kueue admits, injecting the flavor into the manager
    // Job; the mirror resumes without it and the Job completes.
    let ready = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "status": {"admissionChecks": [{
        "name": gate, "state": "Ready", "message": "let go by the test",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    workloads
        .patch_status(
            &workload,
            &PatchParams::apply("e2e-gate").force(),
            &Patch::Apply(&ready),
        )
        .await
        .expect("open the gate");
    let admitted = admitted(&s, "flavored").await;
    assert_eq!(
        constraints(&pod_spec(&admitted)),
        (true, true),
        "Kueue injected the flavor into the manager Job"
    );
    let resumed = resumed_mirror(&mirrors, "flavored", &admitted).await;
    assert_eq!(resumed.spec.as_ref().and_then(|s| s.suspend), Some(false));
    assert_eq!(
        constraints(&pod_spec(&resumed)),
        (false, false),
        "after admission the mirror still has neither"
    );
    s.wait_condition("flavored", "Complete").await;
    s.finish(WAIT).await;
}

/// The mirror `name` once it is at the revision of `admitted` (the manager
/// Job as Kueue unsuspended it) or later.
pub(super) async fn resumed_mirror(mirrors: &Api<Job>, name: &str, admitted: &Job) -> Job {
    let generation = admitted.metadata.generation.unwrap_or_default();
    let revision = |m: &Job| {
        m.annotations()
            .get(REVISION_ANNOTATION)
            .and_then(|r| r.parse::<i64>().ok())
    };
    wait::until(
        format!("mirror {name} at revision {generation} or later"),
        WAIT,
        || async {
            match mirrors.get_opt(name).await {
                Ok(Some(m)) if revision(&m) >= Some(generation) => Seen::Ready(m),
                Ok(m) => Seen::Waiting(format!("revision {:?}", m.as_ref().and_then(revision))),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await
}

/// The manager Job `name` once Kueue unsuspended it.
pub(super) async fn admitted(s: &Scenario, name: &str) -> Job {
    wait::until(format!("Kueue unsuspending Job {name}"), WAIT, || async {
        match s.jobs.get(name).await {
            Ok(job) if job.spec.as_ref().and_then(|s| s.suspend) == Some(false) => Seen::Ready(job),
            Ok(job) => Seen::Waiting(format!("suspend {:?}", job.spec.and_then(|s| s.suspend))),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await
}
