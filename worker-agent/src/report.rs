//! Pure translations between what the worker's API server says and what the
//! agent reports: a mirror's phase, and why an apply was rejected.

use jobrelay_proto::v1::{MirrorPhase, RejectReason};
use jobrelay_proto::wire::REVISION_ANNOTATION;
use k8s_openapi::api::batch::v1::{Job, JobSpec};

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
    } else if condition("Suspended") || job.spec.as_ref().and_then(|s| s.suspend) == Some(true) {
        // Asked to suspend, before the Job controller said so too.
        MirrorPhase::Suspended
    } else if status.and_then(|s| s.active).unwrap_or(0) > 0 {
        MirrorPhase::Running
    } else {
        MirrorPhase::Pending
    }
}

/// Drops from a cached mirror what no report reads: of its spec only
/// `suspend` is kept (the pod template is most of a Job). Applies read the
/// Job they update from the API server, not from the cache. For
/// `WatchStreamExt::modify` before the agent's Job reflector.
pub fn keep_what_is_reported(job: &mut Job) {
    if let Some(spec) = job.spec.as_mut() {
        *spec = JobSpec {
            suspend: spec.suspend,
            ..JobSpec::default()
        };
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

/// Why an apply did not take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyFailure {
    /// The worker refused it; [`RejectReason::is_permanent`] says whether
    /// that can clear by itself.
    Refused(RejectReason, String),
    /// Something of jobrelay's own must settle first (an older mirror of the
    /// same name is still going): try again on the next pass, tell no one.
    Wait(String),
}

/// The refusal an API error from applying a mirror stands for.
pub fn apply_failure(error: &kube::Error) -> ApplyFailure {
    let kube::Error::Api(status) = error else {
        return ApplyFailure::Refused(RejectReason::Unavailable, error.to_string());
    };
    let message = status.message.clone();
    let reason = refusal_reason(status.code, &status.reason, &message);
    ApplyFailure::Refused(reason, message)
}

/// Classifies an API server's answer by its code, reason and message.
pub fn refusal_reason(code: u16, reason: &str, message: &str) -> RejectReason {
    if message.contains("admission webhook") && message.contains("denied the request") {
        return RejectReason::WebhookDenied;
    }
    if message.contains("ValidatingAdmissionPolicy") && message.contains("denied request") {
        return RejectReason::PolicyDenied;
    }
    match code {
        404 if message.contains("namespaces") => RejectReason::NamespaceMissing,
        403 if message.contains("because it is being terminated") => {
            RejectReason::NamespaceTerminating
        }
        403 if message.contains("exceeded quota") => RejectReason::QuotaExceeded,
        401 | 403 => RejectReason::Forbidden,
        400 | 422 if reason != "Timeout" => RejectReason::Invalid,
        408 | 409 | 429 | 500..=599 => RejectReason::Unavailable,
        _ => RejectReason::Other,
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
        let mut asked_to_suspend = job(serde_json::json!({}));
        asked_to_suspend.spec = Some(
            serde_json::from_value(serde_json::json!({"suspend": true, "template": {}})).unwrap(),
        );
        assert_eq!(
            phase_of(&asked_to_suspend),
            MirrorPhase::Suspended,
            "suspended before the Job controller wrote its condition"
        );
        assert_eq!(revision_of(&job(serde_json::json!({}))), 7);
    }

    #[test]
    fn a_cached_mirror_keeps_what_its_report_reads_and_not_its_template() {
        let mut cached: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "annotations": {REVISION_ANNOTATION: "7"}},
            "spec": {"suspend": true, "parallelism": 4, "template": {"spec": {"containers": [
                {"name": "train", "image": "trainer:1", "args": ["--epochs", "90"]}]}}},
            "status": {"active": 1},
        }))
        .unwrap();
        let before = (
            phase_of(&cached),
            revision_of(&cached),
            cached.status.clone(),
        );
        keep_what_is_reported(&mut cached);
        assert_eq!(
            (
                phase_of(&cached),
                revision_of(&cached),
                cached.status.clone()
            ),
            before
        );
        let spec = cached.spec.unwrap();
        assert_eq!(spec.suspend, Some(true));
        assert_eq!(spec.parallelism, None);
        assert!(spec.template.spec.is_none(), "the pod template is dropped");
    }

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure(message, "").with_code(code),
        ))
    }

    fn reason(code: u16, message: &str) -> RejectReason {
        let ApplyFailure::Refused(reason, text) = apply_failure(&api_error(code, message)) else {
            panic!("not a refusal");
        };
        assert_eq!(text, message, "the worker's message is kept");
        reason
    }

    #[test]
    fn refusals_that_can_clear_are_told_apart_from_final_ones() {
        use RejectReason::*;
        let cases = [
            (404, "namespaces \"ml\" not found", NamespaceMissing),
            (
                403,
                "jobs.batch \"a\" is forbidden: unable to create new content in namespace ml because it is being terminated",
                NamespaceTerminating,
            ),
            (
                403,
                "jobs.batch \"a\" is forbidden: exceeded quota: jobs, requested: count/jobs.batch=1, used: count/jobs.batch=1, limited: count/jobs.batch=1",
                QuotaExceeded,
            ),
            (
                400,
                "admission webhook \"policy.example.com\" denied the request: no GPUs on Sundays",
                WebhookDenied,
            ),
            (
                422,
                "jobs.batch \"a\" is forbidden: ValidatingAdmissionPolicy 'jobrelay-agent-pods' with binding 'jobrelay-agent-pods' denied request: privileged containers are not allowed",
                PolicyDenied,
            ),
            (
                403,
                "jobs.batch is forbidden: User \"agent\" cannot create",
                Forbidden,
            ),
            (429, "too many requests", Unavailable),
            (503, "unavailable", Unavailable),
            (500, "etcdserver: request timed out", Unavailable),
            (
                422,
                "Job.batch \"a\" is invalid: spec.template: Invalid value",
                Invalid,
            ),
            (405, "method not allowed", Other),
        ];
        for (code, message, want) in cases {
            assert_eq!(reason(code, message), want, "{code} {message}");
        }
        for transient in [
            NamespaceMissing,
            NamespaceTerminating,
            QuotaExceeded,
            WebhookDenied,
            Forbidden,
            Unavailable,
            Other,
        ] {
            assert!(!transient.is_permanent(), "{transient:?}");
        }
        assert!(Invalid.is_permanent() && PolicyDenied.is_permanent());
    }

    #[test]
    fn a_request_that_never_got_an_answer_is_unavailable() {
        let error = kube::Error::Service("connection reset".into());
        assert!(matches!(
            apply_failure(&error),
            ApplyFailure::Refused(RejectReason::Unavailable, _)
        ));
    }
}
