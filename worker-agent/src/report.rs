//! Pure translations between what the worker's API server says and what the
//! agent reports: a mirror's phase, and why an apply was rejected.

use jobrelay_proto::v1::{MirrorPhase, RejectReason};
use jobrelay_proto::wire::REVISION_ANNOTATION;
use k8s_openapi::api::batch::v1::Job;

/// The phase of a mirror Job as the manager sees it.
pub fn phase_of(job: &Job) -> MirrorPhase {
    if job.metadata.deletion_timestamp.is_some() {
        return MirrorPhase::Deleting;
    }
    let status = job.status.as_ref();
    let condition = |type_: &str| {
        status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == type_ && c.status == "True")
    };
    if condition("Complete") {
        MirrorPhase::Succeeded
    } else if condition("Failed") {
        MirrorPhase::Failed
    } else if condition("Suspended") {
        MirrorPhase::Suspended
    } else if status.and_then(|s| s.active).unwrap_or(0) > 0 {
        MirrorPhase::Running
    } else {
        MirrorPhase::Pending
    }
}

/// The manager Job revision a mirror was applied from.
pub fn revision_of(job: &Job) -> u64 {
    job.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION_ANNOTATION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// What to do about an API error from applying a mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyFailure {
    /// Final for this revision: tell the manager.
    Rejected(RejectReason, String),
    /// Passing (overload, timeout, server error): try again later.
    Retry(String),
}

pub fn apply_failure(error: &kube::Error) -> ApplyFailure {
    let kube::Error::Api(status) = error else {
        return ApplyFailure::Retry(error.to_string());
    };
    let message = status.message.clone();
    match status.code {
        404 if message.contains("namespaces") => {
            ApplyFailure::Rejected(RejectReason::NamespaceMissing, message)
        }
        400 | 422 => ApplyFailure::Rejected(RejectReason::Invalid, message),
        401 | 403 => ApplyFailure::Rejected(RejectReason::Forbidden, message),
        409 | 429 | 500..=599 => ApplyFailure::Retry(message),
        _ => ApplyFailure::Rejected(RejectReason::Other, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(status: serde_json::Value) -> Job {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "annotations": {REVISION_ANNOTATION: "7"}},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn phases_follow_the_workers_job_status() {
        assert_eq!(phase_of(&job(serde_json::json!({}))), MirrorPhase::Pending);
        assert_eq!(
            phase_of(&job(serde_json::json!({"active": 2}))),
            MirrorPhase::Running
        );
        let complete = serde_json::json!({"conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]});
        assert_eq!(phase_of(&job(complete)), MirrorPhase::Succeeded);
        let failed =
            serde_json::json!({"active": 1, "conditions": [{"type": "Failed", "status": "True"}]});
        assert_eq!(phase_of(&job(failed)), MirrorPhase::Failed);
        assert_eq!(revision_of(&job(serde_json::json!({}))), 7);
    }

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure(message, "").with_code(code),
        ))
    }

    #[test]
    fn final_refusals_are_reported_and_passing_trouble_is_retried() {
        assert_eq!(
            apply_failure(&api_error(404, "namespaces \"ml\" not found")),
            ApplyFailure::Rejected(
                RejectReason::NamespaceMissing,
                "namespaces \"ml\" not found".into()
            )
        );
        assert!(matches!(
            apply_failure(&api_error(422, "spec.template: Invalid")),
            ApplyFailure::Rejected(RejectReason::Invalid, _)
        ));
        assert!(matches!(
            apply_failure(&api_error(403, "forbidden")),
            ApplyFailure::Rejected(RejectReason::Forbidden, _)
        ));
        assert!(matches!(
            apply_failure(&api_error(503, "unavailable")),
            ApplyFailure::Retry(_)
        ));
        assert!(matches!(
            apply_failure(&api_error(429, "slow down")),
            ApplyFailure::Retry(_)
        ));
    }
}
