//! Pure translations between what the worker's API server says and what the
//! agent reports: a mirror's revision, why an apply was rejected (a
//! mirror's phase is its kind's, see [`crate::kinds`]), how long
//! something has lasted, and a message cut short for the manager.

use jobrelay_proto::v1::RejectReason;
use jobrelay_proto::wire::REVISION_ANNOTATION;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// `message` cut to at most `bytes` (at least 3), on a character
/// boundary, ending in `…` where it was cut.
pub fn cut_short(message: &str, bytes: usize) -> String {
    if message.len() <= bytes {
        return message.to_string();
    }
    let mut end = bytes - "…".len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

/// How long since `since` it is at `now`, measured on this worker (none
/// for a time to come): a duration, so no two clusters' clocks are
/// compared.
pub fn lasted(since: Timestamp, now: Timestamp) -> Option<prost_types::Duration> {
    let lasted = now
        .duration_since(since)
        .max(SignedDuration::ZERO)
        .unsigned_abs();
    prost_types::Duration::try_from(lasted).ok()
}

/// The manager revision a mirror was applied from.
pub fn revision_of(mirror: &ObjectMeta) -> u64 {
    mirror
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
    let reason = refusal_reason(&ApiRefusal::of(status));
    ApplyFailure::Refused(reason, status.message.clone())
}

/// What of the API server's `metav1.Status` a refusal is classified by.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ApiRefusal<'a> {
    /// The HTTP status code.
    pub code: u16,
    /// The machine-readable `reason` (`Forbidden`, `NotFound`, ...); empty
    /// when the server gave none or the body was not a `Status`.
    pub reason: &'a str,
    /// `details.kind`: for most errors the resource the refusal is about
    /// (`namespaces`, `jobs`), as `apierrors` fills it in.
    pub kind: &'a str,
    /// `details.group`: the API group of [`Self::kind`], empty for core.
    pub group: &'a str,
    /// `details.causes[].reason`, e.g. `NamespaceTerminating`.
    pub cause_reasons: Vec<&'a str>,
    /// The human-readable message, for the refusals Kubernetes marks
    /// nowhere else.
    pub message: &'a str,
}

impl<'a> ApiRefusal<'a> {
    /// The parts of `status` a refusal is classified by.
    pub fn of(status: &'a kube::core::Status) -> Self {
        let details = status.details.as_ref();
        ApiRefusal {
            code: status.code,
            reason: &status.reason,
            kind: details.map_or("", |d| d.kind.as_str()),
            group: details.map_or("", |d| d.group.as_str()),
            cause_reasons: details
                .into_iter()
                .flat_map(|d| &d.causes)
                .map(|c| c.reason.as_str())
                .collect(),
            message: &status.message,
        }
    }

    /// The `reason`, or for a reason this agent does not know (none, or the
    /// client's own for a body that was not a `Status`) the one its code
    /// stands for, as `apimachinery`'s `errors.Is*` helpers fall back too.
    fn reason_or_code(&self) -> &str {
        match self.reason {
            "Unauthorized" | "Forbidden" | "NotFound" | "AlreadyExists" | "Conflict"
            | "Invalid" | "BadRequest" | "Timeout" | "ServerTimeout" | "TooManyRequests"
            | "InternalError" | "ServiceUnavailable" => self.reason,
            _ => match self.code {
                400 => "BadRequest",
                401 => "Unauthorized",
                403 => "Forbidden",
                404 => "NotFound",
                408 | 504 => "Timeout",
                409 => "Conflict",
                422 => "Invalid",
                429 => "TooManyRequests",
                503 => "ServiceUnavailable",
                500..=599 => "InternalError",
                _ => "",
            },
        }
    }
}

/// Classifies an API server's refusal of a mirror by its `Status`.
pub fn refusal_reason(refusal: &ApiRefusal) -> RejectReason {
    // Admission denials come first: each takes whatever code and reason its
    // author chose, so only the message tells them from the API server's
    // own. A webhook's status is passed through with nothing added but a
    // message prefix (apiserver pkg/admission/plugin/webhook/errors/
    // statuserror.go); newer servers put "<resource> \"<name>\" is
    // forbidden: " before it, hence `contains`.
    if refusal.message.contains("admission webhook \"")
        && refusal.message.contains("\" denied the request")
    {
        return RejectReason::WebhookDenied;
    }
    // A ValidatingAdmissionPolicy denial is Invalid, Forbidden, Unauthorized
    // or RequestEntityTooLarge as the policy says, with one cause that has
    // neither reason nor field; only the message names the policy
    // (apiserver pkg/admission/plugin/policy/validating/dispatcher.go).
    if refusal.message.contains("ValidatingAdmissionPolicy '")
        && refusal.message.contains("denied request: ")
    {
        return RejectReason::PolicyDenied;
    }
    // NamespaceLifecycle (plugin/pkg/admission/namespace/lifecycle) marks a
    // terminating namespace with a cause, and answers for a missing one
    // with NotFound about the core `namespaces` resource.
    if refusal.cause_reasons.contains(&"NamespaceTerminating") {
        return RejectReason::NamespaceTerminating;
    }
    let reason = refusal.reason_or_code();
    if reason == "NotFound" && refusal.kind == "namespaces" && refusal.group.is_empty() {
        return RejectReason::NamespaceMissing;
    }
    // ResourceQuota's refusal is a plain Forbidden about the Job, no cause,
    // the same shape as RBAC's (apiserver pkg/admission/plugin/resourcequota/
    // controller.go): only its message prefix sets it apart.
    if reason == "Forbidden" && refusal.message.contains("forbidden: exceeded quota: ") {
        return RejectReason::QuotaExceeded;
    }
    match reason {
        "Unauthorized" | "Forbidden" => RejectReason::Forbidden,
        "BadRequest" | "Invalid" => RejectReason::Invalid,
        "AlreadyExists" | "Conflict" | "Timeout" | "ServerTimeout" | "TooManyRequests"
        | "InternalError" | "ServiceUnavailable" => RejectReason::Unavailable,
        _ => RejectReason::Other,
    }
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod refusal_tests;

#[cfg(test)]
mod tests {
    use super::cut_short;

    #[test]
    fn a_message_is_cut_short_on_a_character_boundary() {
        assert_eq!(cut_short("short", 8), "short");
        assert_eq!(cut_short("abcdefgh", 8), "abcdefgh");
        assert_eq!(cut_short("abcdefghi", 8), "abcde…");
        assert_eq!(cut_short("ééééé", 8), "éé…", "not inside a character");
    }
}
