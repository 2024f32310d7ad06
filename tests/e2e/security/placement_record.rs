//! Where a Job runs is jobrelay's record alone: a tenant who may edit Jobs
//! can write the `jobrelay.dev/cluster` annotation, but not the seal beside
//! it. A Job created with the annotation is placed by jobrelay's rules — a
//! cluster that refuses its namespace gets nothing — and a running Job's
//! record changed or unsealed is written back, its one mirror kept. Each
//! time the Job says why.

use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_manager::job::record::SEAL_ANNOTATION;
use jobrelay_proto::wire::CLUSTER_KEY;
use jobrelay_testbed::kit;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::EXCLUSIVE;

/// The worker that refuses the first scenario's namespace.
const REFUSING: &str = "worker-2";
/// The label of that namespace.
const REFUSED_LABEL: &str = "jobrelay-e2e/forged-record";

/// Merges `patch` into the manager Job `name`.
async fn patch_job(s: &Scenario, name: &str, patch: Value) {
    s.jobs
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching Job {name}: {e}"));
}

/// Waits until the manager Job `name` carries a seal, and the plain
/// annotation names the cluster it seals; that cluster.
async fn sealed_on(s: &Scenario, name: &str) -> String {
    wait::until(format!("Job {name}'s record sealed"), WAIT, || async {
        let job = match s.jobs.get(name).await {
            Ok(job) => job,
            Err(e) => return Seen::Waiting(e.to_string()),
        };
        let annotations = job.annotations();
        let sealed = annotations
            .get(SEAL_ANNOTATION)
            .and_then(|seal| seal.rsplit(':').next());
        match (annotations.get(CLUSTER_KEY), sealed) {
            (Some(cluster), Some(sealed)) if cluster == sealed => Seen::Ready(cluster.clone()),
            other => Seen::Waiting(format!("{other:?}")),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_annotation_a_tenant_wrote_places_nothing_and_is_removed() {
    let _exclusive = EXCLUSIVE.lock().await;
    let s = Scenario::relayed("forged").await;
    let namespaces: Api<Namespace> = Api::all(kit::client(s.clusters.manager()).await);
    let label = json!({"metadata": {"labels": {REFUSED_LABEL: "yes"}}});
    namespaces
        .patch(&s.ns, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap_or_else(|e| panic!("labelling namespace {}: {e}", s.ns));
    let refuse = json!({"matchExpressions": [{"key": REFUSED_LABEL, "operator": "DoesNotExist"}]});
    s.set_worker_cluster(REFUSING, json!({"namespaceSelector": refuse}))
        .await;
    // A Job pinned there by label is refused by the cluster's rules: the
    // manager sees the selector.
    s.create(s.job("pinned").label(CLUSTER_KEY, REFUSING).run_for("1s"))
        .await;
    s.wait_event("pinned", "Unplaceable").await;

    // Annotated instead, as jobrelay records a placement: ignored, placed
    // by the rules, and the annotation replaced by jobrelay's record.
    let uid = s
        .create(
            s.job("forged")
                .annotate(CLUSTER_KEY, REFUSING)
                .run_for("2s"),
        )
        .await;
    let note = s.wait_event("forged", "PlacementRecordRestored").await;
    for part in [
        format!(
            "annotation jobrelay.dev/cluster says \"{REFUSING}\", which jobrelay did not write"
        ),
        "the Job is placed by jobrelay's rules".to_string(),
        "label the Job jobrelay.dev/cluster when creating it".to_string(),
    ] {
        assert!(note.contains(&part), "{part:?} in {note:?}");
    }
    assert_eq!(sealed_on(&s, "forged").await, "worker-1");
    s.wait_condition("forged", "Complete").await;
    assert!(
        !s.relay.agent_log(REFUSING).contains(&uid),
        "the refusing cluster heard nothing of the Job"
    );
    s.set_worker_cluster(REFUSING, json!({"namespaceSelector": null}))
        .await;
    s.finish(WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_running_jobs_record_changed_or_unsealed_by_a_tenant_is_written_back_and_it_runs_once() {
    let _exclusive = EXCLUSIVE.lock().await;
    let s = Scenario::relayed("rewritten").await;
    let uid = s
        .create(s.job("steady").label(CLUSTER_KEY, "worker-1").run_for("1h"))
        .await;
    assert_eq!(sealed_on(&s, "steady").await, "worker-1");
    s.wait_mirrors(1, WAIT).await;

    // Moved by hand: written back, and the Job told.
    patch_job(
        &s,
        "steady",
        json!({"metadata": {"annotations": {CLUSTER_KEY: "worker-2"}}}),
    )
    .await;
    let note = s.wait_event("steady", "PlacementRecordRestored").await;
    for part in [
        "annotation jobrelay.dev/cluster says \"worker-2\", which jobrelay did not write",
        "the Job stays on cluster worker-1, and the annotation is written back",
    ] {
        assert!(note.contains(part), "{part:?} in {note:?}");
    }
    assert_eq!(sealed_on(&s, "steady").await, "worker-1");

    // Its seal removed: the mirror the fleet holds keeps it where it is.
    patch_job(
        &s,
        "steady",
        json!({"metadata": {"annotations": {SEAL_ANNOTATION: null}}}),
    )
    .await;
    assert_eq!(sealed_on(&s, "steady").await, "worker-1");
    let mirrors = s.mirrors().await.expect("listing mirrors");
    assert_eq!(
        mirrors.get(&uid),
        Some(&vec!["worker-1".to_string()]),
        "one mirror, where it was: {mirrors:?}"
    );
    assert!(
        !s.relay.agent_log("worker-2").contains(&uid),
        "worker-2 heard nothing of the Job"
    );
    s.finish(WAIT).await;
}
