//! Workloads in a jobrelay check that jobrelay can never relay: a queued Job
//! without jobrelay's `spec.managedBy`, and a Workload another kind owns.
//! Each gets its check `Rejected` with a message naming the field or kind
//! and the fix — which Kueue repeats in its Event as it deactivates the
//! Workload and gives its quota back — instead of waiting forever.

use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_manager::kueue::types::Workload;
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::objects::kueue_objects::{self, LOCAL_QUEUE};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::json;

use super::{CHECK, QUEUE_NAME, queued};

/// Waits until Kueue took jobrelay's `Rejected` on Workload `name`: it
/// deactivates the Workload and resets the check to `Pending` (with
/// `quota_back`, the quota is released too: Kueue does that once the owner's
/// integration stopped it, which only a kind Kueue runs has), and its
/// `AdmissionCheckRejected` Event on the Workload carries jobrelay's message,
/// which is returned.
async fn rejected(s: &Scenario, name: &str, quota_back: bool) -> String {
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    wait::until(
        format!("Workload {name} deactivated after its check {CHECK} was Rejected"),
        WAIT,
        || async {
            match workloads.get_opt(name).await {
                Ok(Some(w)) => {
                    let message = w
                        .check(CHECK)
                        .and_then(|c| c.message.clone())
                        .unwrap_or_default();
                    let deactivated = w.spec.active == Some(false);
                    match deactivated && !(quota_back && w.has("QuotaReserved")) {
                        true if message.ends_with("Previously: Rejected") => Seen::Ready(()),
                        _ => {
                            Seen::Waiting(format!("active {:?}, check {message:?}", w.spec.active))
                        }
                    }
                }
                other => Seen::Waiting(format!("{other:?}")),
            }
        },
    )
    .await;
    s.wait_event(name, "AdmissionCheckRejected").await
}

#[tokio::test]
async fn a_queued_job_without_jobrelays_managed_by_is_rejected_saying_so() {
    let s = queued("unmanaged", 1).await;
    s.create(
        TestJob::new(&s.ns, "plain")
            .label(QUEUE_NAME, LOCAL_QUEUE)
            .cpu("1"),
    )
    .await;
    let workload = jobrelay_e2e::scenario::workload_of(&s, "plain")
        .await
        .name_any();
    let message = rejected(&s, &workload, true).await;
    println!("check {CHECK}: Rejected: {message}");
    assert!(
        message.contains("Job plain has no spec.managedBy")
            && message.contains("create the Job again"),
        "{message}"
    );
    let note = s.wait_event("plain", "AdmissionCheckRejected").await;
    assert!(note.contains("spec.managedBy"), "{note}");
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_workload_another_kind_owns_is_rejected_naming_the_kind() {
    let s = queued("foreign", 1).await;
    let client = s.jobs.clone().into_client();
    let owner = Api::<ConfigMap>::namespaced(client.clone(), &s.ns)
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("owner".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("create the owner");
    kueue_objects::apply(
        &client,
        "Workload",
        Some(&s.ns),
        json!({
            "metadata": {
                "name": "foreign",
                "ownerReferences": [{
                    "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                    "uid": owner.uid(), "controller": true,
                }],
            },
            "spec": {
                "queueName": LOCAL_QUEUE,
                "podSets": [{
                    "name": "main", "count": 1,
                    "template": {"spec": {
                        "restartPolicy": "Never",
                        "containers": [{
                            "name": "main", "image": "busybox",
                            "resources": {"requests": {"cpu": "1"}},
                        }],
                    }},
                }],
            },
        }),
    )
    .await
    .expect("create the Workload");
    let message = rejected(&s, "foreign", false).await;
    println!("check {CHECK}: Rejected: {message}");
    assert!(
        message.contains("ConfigMap owner (v1)")
            && message.contains("batch/v1 Jobs and jobset.x-k8s.io/v1alpha2 JobSets only"),
        "{message}"
    );
    s.finish(WAIT).await;
}
