use base64::Engine;
use serde_json::{Value, json};

use super::*;
use crate::kueue::CONTROLLER_NAME;
use crate::webhook::decide::Leave;

/// LocalQueue `queue` everywhere, in ClusterQueue `cq`, which lists the
/// check `jobrelay` of jobrelay's.
struct OneQueue;

impl Queues for OneQueue {
    fn cluster_queue_of(&self, _: &str, name: &str) -> Option<String> {
        (name == "queue").then(|| "cq".into())
    }
    fn checks_of(&self, cluster_queue: &str) -> Option<Vec<String>> {
        (cluster_queue == "cq").then(|| vec!["jobrelay".into()])
    }
    fn controller_of(&self, check: &str) -> Option<String> {
        (check == "jobrelay").then(|| CONTROLLER_NAME.into())
    }
}

fn review(labels: Value, spec: Value) -> Vec<u8> {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0c9a8d74",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "namespace": "team-a",
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"generateName": "train-", "namespace": "team-a", "labels": labels},
                "spec": spec,
            },
        },
    });
    serde_json::to_vec(&review).expect("serializes")
}

fn patch_of(response: &Value) -> Value {
    let encoded = response["response"]["patch"].as_str().expect("a patch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("base64");
    serde_json::from_slice(&bytes).expect("JSON")
}

#[test]
fn a_queued_job_is_allowed_with_jobrelays_managed_by_patched_in() {
    let body = review(json!({"kueue.x-k8s.io/queue-name": "queue"}), json!({}));
    let (response, outcome) = answer(&body, Caches::Synced(&OneQueue));
    assert_eq!(response["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(response["kind"], "AdmissionReview");
    assert_eq!(response["response"]["uid"], "0c9a8d74");
    assert_eq!(response["response"]["allowed"], true);
    assert_eq!(response["response"]["patchType"], "JSONPatch");
    assert_eq!(
        patch_of(&response),
        json!([{"op": "add", "path": "/spec/managedBy", "value": CONTROLLER_NAME}])
    );
    assert!(
        matches!(&outcome, Outcome::Decided { job, defaulting: Defaulting::SetManagedBy { .. } } if job == "team-a/train-"),
        "{outcome:?}"
    );
}

#[test]
fn a_job_left_alone_is_allowed_without_a_patch() {
    let body = review(
        json!({"kueue.x-k8s.io/queue-name": "queue"}),
        json!({"managedBy": "kueue.x-k8s.io/multikueue"}),
    );
    let (response, outcome) = answer(&body, Caches::Synced(&OneQueue));
    assert_eq!(response["response"]["allowed"], true);
    assert_eq!(response["response"].get("patch"), None);
    assert_eq!(
        outcome,
        Outcome::Decided {
            job: "team-a/train-".into(),
            defaulting: Defaulting::Leave(Leave::ManagedByAlready(
                "kueue.x-k8s.io/multikueue".into()
            )),
        }
    );
}

#[test]
fn without_kueue_every_job_is_allowed_unchanged() {
    let body = review(json!({"kueue.x-k8s.io/queue-name": "queue"}), json!({}));
    let (response, outcome) = answer(&body, Caches::<OneQueue>::NoKueue);
    assert_eq!(response["response"]["allowed"], true);
    assert_eq!(response["response"].get("patch"), None);
    assert_eq!(outcome, Outcome::NoKueue);
}

#[test]
fn caches_not_synced_allow_the_job_unchanged_saying_why() {
    let body = review(json!({"kueue.x-k8s.io/queue-name": "queue"}), json!({}));
    let (response, outcome) = answer(&body, Caches::<OneQueue>::NotSynced);
    assert_eq!(response["response"]["uid"], "0c9a8d74");
    assert_eq!(response["response"]["allowed"], true);
    assert_eq!(response["response"].get("patch"), None);
    assert!(
        matches!(&outcome, Outcome::Undecided { why, .. } if why.contains("not synced")),
        "{outcome:?}"
    );
}

#[test]
fn a_malformed_review_is_allowed_unchanged_keeping_its_uid_when_it_has_one() {
    let body = br#"{"request": {"uid": "u-1", "object": {"metadata": 7}}}"#;
    let (response, outcome) = answer(body, Caches::Synced(&OneQueue));
    assert_eq!(response["response"]["uid"], "u-1");
    assert_eq!(response["response"]["allowed"], true);
    assert!(
        matches!(&outcome, Outcome::Undecided { why, .. } if why.starts_with("not an AdmissionReview")),
        "{outcome:?}"
    );
    let (response, _) = answer(b"not json", Caches::Synced(&OneQueue));
    assert_eq!(response["response"]["allowed"], true);
}

#[test]
fn an_update_is_not_defaulted() {
    let mut review: Value = serde_json::from_slice(&review(
        json!({"kueue.x-k8s.io/queue-name": "queue"}),
        json!({}),
    ))
    .expect("JSON");
    review["request"]["operation"] = json!("UPDATE");
    let body = serde_json::to_vec(&review).expect("serializes");
    let (response, outcome) = answer(&body, Caches::Synced(&OneQueue));
    assert_eq!(response["response"].get("patch"), None);
    assert!(matches!(outcome, Outcome::Undecided { .. }), "{outcome:?}");
}
