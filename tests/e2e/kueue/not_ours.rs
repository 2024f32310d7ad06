//! Workloads in a jobrelay check that jobrelay can never relay: a queued Job
//! without jobrelay's `spec.managedBy`, and a Workload another kind owns.
//! Each gets its check `Rejected` with a message naming the field or kind
//! and the fix, and its quota goes back, instead of waiting forever.

use jobrelay_e2e::fixtures::TestJob;
use jobrelay_e2e::kueue_objects::{self, LOCAL_QUEUE};
use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_e2e::wait::{self, Seen};
use jobrelay_manager::kueue::types::Workload;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::json;

use super::{CHECK, QUEUE_NAME, queued};

/// Waits until the check of Workload `name` is `Rejected`; its message.
async fn rejected(s: &Scenario, name: &str) -> String {
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    wait::until(
        format!("check {CHECK} Rejected on Workload {name}"),
        WAIT,
        || async {
            match workloads.get_opt(name).await {
                Ok(Some(w)) => match w.check(CHECK) {
                    Some(c) if c.state == "Rejected" => {
                        Seen::Ready(c.message.clone().unwrap_or_default())
                    }
                    other => Seen::Waiting(format!("{other:?}")),
                },
                other => Seen::Waiting(format!("{other:?}")),
            }
        },
    )
    .await
}

/// Waits until Workload `name` holds no quota.
async fn quota_released(s: &Scenario, name: &str) {
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    wait::until(
        format!("Workload {name} holding no quota"),
        WAIT,
        || async {
            match workloads.get_opt(name).await {
                Ok(Some(w)) if w.has("QuotaReserved") => Seen::Waiting("quota reserved".into()),
                Ok(_) => Seen::Ready(()),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await
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
    let workload = kueue_objects::workload_of(&s, "plain").await.name_any();
    let message = rejected(&s, &workload).await;
    println!("check {CHECK}: Rejected: {message}");
    assert!(
        message.contains("Job plain has no spec.managedBy")
            && message.contains("create the Job again"),
        "{message}"
    );
    quota_released(&s, &workload).await;
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
    let message = rejected(&s, "foreign").await;
    println!("check {CHECK}: Rejected: {message}");
    assert!(
        message.contains("ConfigMap owner (v1)") && message.contains("batch/v1 Jobs only"),
        "{message}"
    );
    quota_released(&s, "foreign").await;
    s.finish(WAIT).await;
}
