//! One AdmissionReview (`admission.k8s.io/v1`) of a Job being created, read
//! and answered: the Job is always allowed, with jobrelay's `managedBy`
//! patched in when [`decide`] says so. A review that cannot be decided
//! (caches not synced, a body that is not a review of a Job) is allowed
//! unchanged, and the outcome says why, for the log.

use base64::Engine;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::{Value, json};

use super::decide::{CreatedJob, Defaulting, Queues, decide};

/// The path the API server calls.
pub const PATH: &str = "/mutate-batch-v1-job";

/// What the caches can tell now.
pub enum Caches<'a, Q> {
    /// Kueue is not installed (or not found yet): no Job is queued by it.
    NoKueue,
    /// Kueue is installed but the caches have not listed everything yet.
    NotSynced,
    Synced(&'a Q),
}

/// How a review ended, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Decided {
        job: String,
        defaulting: Defaulting,
    },
    /// Kueue is not installed: nothing to default.
    NoKueue,
    /// Allowed unchanged without a decision, and why.
    Undecided {
        job: String,
        why: String,
    },
}

#[derive(Deserialize)]
struct Review {
    request: Option<ReviewRequest>,
}

#[derive(Deserialize)]
struct ReviewRequest {
    uid: String,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    object: Option<JobObject>,
}

#[derive(Deserialize)]
struct JobObject {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<JobSpec>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct JobSpec {
    #[serde(default)]
    managed_by: Option<String>,
}

/// Answers the AdmissionReview in `body` from what `caches` say: the
/// response review, and how it ended.
pub fn answer<Q: Queues>(body: &[u8], caches: Caches<'_, Q>) -> (Value, Outcome) {
    let request = match serde_json::from_slice::<Review>(body) {
        Ok(Review {
            request: Some(request),
        }) => request,
        Ok(Review { request: None }) => return undecided(None, "?", "the review has no request"),
        Err(error) => {
            // The uid, if it can be found, lets the API server take the answer.
            let uid = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|review| review["request"]["uid"].as_str().map(str::to_string));
            let why = format!("not an AdmissionReview of a Job: {error}");
            return undecided(uid, "?", &why);
        }
    };
    let Some(object) = &request.object else {
        return undecided(Some(request.uid), "?", "the review carries no object");
    };
    let namespace = request
        .namespace
        .as_deref()
        .or(object.metadata.namespace.as_deref())
        .unwrap_or_default();
    let name = object
        .metadata
        .name
        .as_deref()
        .or(object.metadata.generate_name.as_deref())
        .unwrap_or_default();
    let job = format!("{namespace}/{name}");
    if request.operation != "CREATE" {
        let why = format!("operation {} is not a create", request.operation);
        return undecided(Some(request.uid), &job, &why);
    }
    let queues = match caches {
        Caches::NoKueue => return (allowed(&request.uid, None), Outcome::NoKueue),
        Caches::NotSynced => {
            let why = "the caches of Kueue's queues are not synced yet";
            return undecided(Some(request.uid), &job, why);
        }
        Caches::Synced(queues) => queues,
    };
    let created = CreatedJob {
        namespace,
        queue_name: object
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(jobrelay_proto::wire::QUEUE_NAME_LABEL))
            .map(String::as_str),
        managed_by: object.spec.as_ref().and_then(|s| s.managed_by.as_deref()),
    };
    let defaulting = decide(&created, queues);
    let review = allowed(&request.uid, defaulting.patch());
    (review, Outcome::Decided { job, defaulting })
}

fn undecided(uid: Option<String>, job: &str, why: &str) -> (Value, Outcome) {
    let outcome = Outcome::Undecided {
        job: job.to_string(),
        why: why.to_string(),
    };
    (allowed(uid.as_deref().unwrap_or_default(), None), outcome)
}

/// A review allowing request `uid`, with `patch` if there is one.
fn allowed(uid: &str, patch: Option<json_patch::Patch>) -> Value {
    let mut response = json!({"uid": uid, "allowed": true});
    if let Some(patch) = patch.and_then(|p| serde_json::to_vec(&p).ok()) {
        response["patchType"] = json!("JSONPatch");
        response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(patch));
    }
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    })
}

#[cfg(test)]
#[path = "review_tests.rs"]
mod tests;
