//! Refusals classified from the bodies API servers really send. Unless a
//! test says otherwise, each body was captured from the kube-apiserver the
//! e2e kit runs (v1.34), answering a `POST` of a batch/v1 Job as the agent
//! sends it.

use super::*;

/// The refusal `body` stands for, checking the worker's message is kept.
fn refused(body: &str) -> RejectReason {
    let status: kube::core::Status = serde_json::from_str(body).expect("a Status body");
    let message = status.message.clone();
    let ApplyFailure::Refused(reason, text) = apply_failure(&kube::Error::Api(status.boxed()))
    else {
        panic!("not a refusal: {body}");
    };
    assert_eq!(text, message, "the worker's message is kept");
    reason
}

#[test]
fn a_namespace_missing_is_notfound_about_namespaces() {
    let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"namespaces \"ml\" not found","reason":"NotFound",
        "details":{"name":"ml","kind":"namespaces"},"code":404}"#;
    assert_eq!(refused(body), RejectReason::NamespaceMissing);
    // A Job gone between two requests is not a missing namespace.
    let job_gone = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"jobs.batch \"a\" not found","reason":"NotFound",
        "details":{"name":"a","group":"batch","kind":"jobs"},"code":404}"#;
    assert_eq!(refused(job_gone), RejectReason::Other);
}

#[test]
fn a_terminating_namespace_is_told_by_its_cause() {
    let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"jobs.batch \"a\" is forbidden: unable to create new content in namespace term because it is being terminated",
        "reason":"Forbidden",
        "details":{"name":"a","group":"batch","kind":"jobs","causes":[{"reason":"NamespaceTerminating",
            "message":"namespace term is being terminated","field":"metadata.namespace"}]},
        "code":403}"#;
    assert_eq!(refused(body), RejectReason::NamespaceTerminating);
}

#[test]
fn an_exceeded_quota_is_a_forbidden_that_says_so() {
    let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"jobs.batch \"c\" is forbidden: exceeded quota: jobs, requested: count/jobs.batch=1, used: count/jobs.batch=2, limited: count/jobs.batch=0",
        "reason":"Forbidden","details":{"name":"c","group":"batch","kind":"jobs"},"code":403}"#;
    assert_eq!(refused(body), RejectReason::QuotaExceeded);
}

#[test]
fn a_webhook_denial_is_whatever_status_the_webhook_chose() {
    // The webhook answered allowed: false with code 403, reason Forbidden.
    let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"admission webhook \"policy.example.com\" denied the request: no GPUs on Sundays",
        "reason":"Forbidden","code":403}"#;
    assert_eq!(refused(body), RejectReason::WebhookDenied);
    // Newer API servers add the resource prefix and details (written from
    // apiserver pkg/admission/plugin/webhook/errors/statuserror.go), here for
    // a webhook that gave a 400 without a reason.
    let newer = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"jobs.batch \"w\" is forbidden: admission webhook \"policy.example.com\" denied the request: no GPUs on Sundays",
        "reason":"Forbidden","details":{"name":"w","group":"batch","kind":"jobs"},"code":400}"#;
    assert_eq!(refused(newer), RejectReason::WebhookDenied);
}

#[test]
fn a_validating_admission_policy_denial_is_told_whatever_its_reason() {
    let invalid = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"jobs.batch \"p\" is forbidden: ValidatingAdmissionPolicy 'no-latest' with binding 'no-latest' denied request: the latest tag is not allowed",
        "reason":"Invalid",
        "details":{"name":"p","group":"batch","kind":"jobs","causes":[{"message":"ValidatingAdmissionPolicy 'no-latest' with binding 'no-latest' denied request: the latest tag is not allowed"}]},
        "code":422}"#;
    assert_eq!(refused(invalid), RejectReason::PolicyDenied);
    // The policy's validation set `reason: Forbidden`.
    let forbidden = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"jobs.batch \"s\" is forbidden: ValidatingAdmissionPolicy 'no-sa' with binding 'no-sa' denied request: ServiceAccount not allowed",
        "reason":"Forbidden",
        "details":{"name":"s","group":"batch","kind":"jobs","causes":[{"message":"ValidatingAdmissionPolicy 'no-sa' with binding 'no-sa' denied request: ServiceAccount not allowed"}]},
        "code":403}"#;
    assert_eq!(refused(forbidden), RejectReason::PolicyDenied);
}

#[test]
fn rbac_refusing_the_agent_is_forbidden() {
    let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"jobs.batch is forbidden: User \"agent\" cannot create resource \"jobs\" in API group \"batch\" in the namespace \"open\"",
        "reason":"Forbidden","details":{"group":"batch","kind":"jobs"},"code":403}"#;
    assert_eq!(refused(body), RejectReason::Forbidden);
}

#[test]
fn a_job_the_api_server_finds_invalid_is_invalid() {
    let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"Job.batch \"a\" is invalid: [spec.template.spec.containers: Required value, spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\"]",
        "reason":"Invalid",
        "details":{"name":"a","group":"batch","kind":"Job","causes":[
            {"reason":"FieldValueRequired","message":"Required value","field":"spec.template.spec.containers"},
            {"reason":"FieldValueRequired","message":"Required value: valid values: \"OnFailure\", \"Never\"","field":"spec.template.spec.restartPolicy"}]},
        "code":422}"#;
    assert_eq!(refused(body), RejectReason::Invalid);
}

#[test]
fn a_webhook_that_cannot_be_called_or_a_busy_server_is_unavailable() {
    let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"Internal error occurred: failed calling webhook \"policy.example.com\": failed to call webhook: Post \"https://127.0.0.1:18443/validate?timeout=10s\": dial tcp 127.0.0.1:18443: connect: connection refused",
        "reason":"InternalError",
        "details":{"causes":[{"message":"failed calling webhook \"policy.example.com\": failed to call webhook: Post \"https://127.0.0.1:18443/validate?timeout=10s\": dial tcp 127.0.0.1:18443: connect: connection refused"}]},
        "code":500}"#;
    assert_eq!(refused(body), RejectReason::Unavailable);
    // Bodies that are not a Status, of which kube's client keeps the text
    // and the code: the max-in-flight filter's plain-text 429 (apiserver
    // pkg/server/filters/maxinflight.go) and a proxy's page.
    for (text, code) in [
        ("Too many requests, please try again later.", 429),
        ("<html>502 Bad Gateway</html>", 502),
    ] {
        let reconstructed =
            kube::core::Status::failure(text, "Failed to parse error data").with_code(code);
        assert_eq!(
            refusal_reason(&ApiRefusal::of(&reconstructed)),
            RejectReason::Unavailable,
            "{code} {text}"
        );
    }
}

#[test]
fn what_no_class_covers_is_other() {
    let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"the server does not allow this method on the requested resource",
        "reason":"MethodNotAllowed","details":{},"code":405}"#;
    assert_eq!(refused(body), RejectReason::Other);
}

#[test]
fn only_refusals_that_cannot_clear_by_themselves_are_final() {
    use RejectReason::*;
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
