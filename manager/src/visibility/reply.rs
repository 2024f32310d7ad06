//! What the logs API answers, in the API server's own forms: a `Status`
//! for every refusal (kubectl prints its message), the resource list for
//! discovery, and the logs as plain text.

use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use jobrelay_proto::v1::LogEndReason;
use jobrelay_proto::wire::{MANAGED_BY, VISIBILITY_GROUP, VISIBILITY_VERSION};
use serde_json::json;

/// Every response's body.
pub type Body = BoxBody<Bytes, std::io::Error>;

/// A refusal: its HTTP status, the API's reason, and what the user reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: StatusCode,
    pub reason: &'static str,
    pub message: String,
}

impl Refusal {
    pub fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        Refusal {
            code,
            reason,
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Refusal::new(StatusCode::NOT_FOUND, "NotFound", message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            message,
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Refusal::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Refusal::new(StatusCode::FORBIDDEN, "Forbidden", message)
    }

    pub fn too_many(message: impl Into<String>) -> Self {
        Refusal::new(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", message)
    }

    /// The `Status` object the API server would answer with.
    pub fn status(&self) -> serde_json::Value {
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code.as_u16(),
        })
    }

    pub fn response(&self) -> Response<Body> {
        let body = serde_json::to_vec(&self.status()).unwrap_or_default();
        respond(self.code, "application/json", body)
    }
}

/// The refusal for a stream the agent ended before any log: `message` is
/// the agent's, naming the Pod or container.
pub fn ended_early(reason: LogEndReason, message: String) -> Refusal {
    match reason {
        LogEndReason::NotFound => Refusal::not_found(message),
        LogEndReason::TooMany => Refusal::too_many(message),
        LogEndReason::Invalid => Refusal::bad_request(message),
        LogEndReason::Failed | LogEndReason::Unspecified | LogEndReason::Done => {
            Refusal::new(StatusCode::BAD_GATEWAY, "InternalError", message)
        }
    }
}

/// Why `user` may not read the logs, as the API server words a refusal.
pub fn forbidden(user: &str, namespace: &str, name: &str, reason: &str) -> String {
    let why = match reason {
        "" => String::new(),
        reason => format!(": {reason}"),
    };
    format!(
        "jobs.{VISIBILITY_GROUP} \"{name}\" is forbidden: User \"{user}\" cannot get resource \"jobs/log\" in API group \"{VISIBILITY_GROUP}\" in the namespace \"{namespace}\"{why}"
    )
}

/// Why a Job that jobrelay does not relay has no logs here.
pub fn not_relayed(namespace: &str, name: &str) -> String {
    format!(
        "no Job {namespace}/{name} relayed by jobrelay (spec.managedBy: {MANAGED_BY}); a Job that runs on this cluster has its logs in kubectl logs"
    )
}

/// Where a relayed Job stands when no worker holds a mirror of it that is
/// not being deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stands {
    /// It waits to be admitted or placed (or for its mirror).
    Waiting,
    Finished,
    /// The manager Job is being deleted.
    Deleted,
}

/// Why a relayed Job has no logs to read: no worker holds its mirror, or
/// its mirror is being deleted with its Pods.
pub fn no_mirror(namespace: &str, name: &str, stands: Stands) -> String {
    match stands {
        Stands::Finished => format!(
            "Job {namespace}/{name} finished and its mirror is deleted, or being deleted, with its Pods and their logs (retention.remoteAfterFinished keeps them for a while)"
        ),
        Stands::Deleted => format!(
            "Job {namespace}/{name} is being deleted, and its mirror with its Pods and their logs"
        ),
        Stands::Waiting => format!(
            "Job {namespace}/{name} has no mirror on a worker cluster now: it waits to be admitted or placed, or its mirror is being replaced (kubectl describe job {name} -n {namespace} says why)"
        ),
    }
}

/// The resources of jobrelay's visibility group, for discovery.
pub fn resources() -> serde_json::Value {
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{VISIBILITY_GROUP}/{VISIBILITY_VERSION}"),
        "resources": [{
            "name": "jobs/log",
            "singularName": "",
            "namespaced": true,
            "kind": "Job",
            "verbs": ["get"],
        }],
    })
}

pub fn respond(code: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Body> {
    let body = Full::new(Bytes::from(body)).map_err(|never| match never {});
    let mut response = Response::new(BoxBody::new(body));
    *response.status_mut() = code;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_a_kubernetes_status() {
        let refusal = Refusal::not_found("Job ml/train has no mirror");
        let status = refusal.status();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["code"], 404);
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["message"], "Job ml/train has no mirror");
        let parsed: kube::core::Status = serde_json::from_value(status).unwrap();
        assert_eq!(parsed.code, 404);
    }

    #[test]
    fn each_early_end_has_its_status() {
        let code = |reason| ended_early(reason, "why".into()).code;
        assert_eq!(code(LogEndReason::NotFound), StatusCode::NOT_FOUND);
        assert_eq!(code(LogEndReason::TooMany), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(code(LogEndReason::Invalid), StatusCode::BAD_REQUEST);
        assert_eq!(code(LogEndReason::Failed), StatusCode::BAD_GATEWAY);
    }

    #[test]
    fn each_refusal_names_the_job_and_what_to_do() {
        let denied = forbidden("bob", "ml", "train", "");
        assert_eq!(
            denied,
            "jobs.visibility.jobrelay.dev \"train\" is forbidden: User \"bob\" cannot get resource \"jobs/log\" in API group \"visibility.jobrelay.dev\" in the namespace \"ml\""
        );
        assert!(forbidden("bob", "ml", "train", "no rule").ends_with(": no rule"));
        assert!(not_relayed("ml", "train").contains("ml/train"));
        let finished = no_mirror("ml", "train", Stands::Finished);
        assert!(
            finished.contains("finished") && finished.contains("retention.remoteAfterFinished")
        );
        let deleted = no_mirror("ml", "train", Stands::Deleted);
        assert!(deleted.contains("is being deleted"), "{deleted}");
        let waiting = no_mirror("ml", "train", Stands::Waiting);
        assert!(
            waiting.contains("kubectl describe job train -n ml"),
            "{waiting}"
        );
    }

    #[test]
    fn discovery_lists_jobs_log() {
        let listed = resources();
        assert_eq!(listed["groupVersion"], "visibility.jobrelay.dev/v1alpha1");
        assert_eq!(listed["resources"][0]["name"], "jobs/log");
        assert_eq!(listed["resources"][0]["verbs"][0], "get");
    }
}
