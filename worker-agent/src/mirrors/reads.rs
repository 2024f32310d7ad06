//! What the agent may conclude of a mirror from what it read: whether its
//! caches can show the mirror's namespace at all, what a read of the API
//! server confirms, and what a re-sent apply into a namespace the policy no
//! longer allows comes to. Pure decisions; `confirm`, `direct` and `write`
//! do the reading.
//!
//! "Not in the caches" is never "gone". Where the policy names its
//! namespaces, the watches cover only those, so a mirror left in a
//! namespace taken out of the policy (the agent restarted with a narrower
//! one) is invisible to them while its Pods run on. Only a read that covers
//! the mirror's namespace and succeeded confirms it gone; a refused or
//! failed read concludes nothing, and a later pass reads again.

use jobrelay_proto::v1::RejectReason;
use jobrelay_proto::wire::{ORIGIN_LABEL, ORIGIN_UID_LABEL};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::namespaces::NamespacePolicy;
use crate::report::ApplyFailure;

/// Where the agent learns what a namespace holds of its mirrors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// Nowhere: jobrelay never writes there (a system namespace, the
    /// agent's own) under any policy, and the worker's API server refuses
    /// the agent's writes there too.
    NeverWritten,
    /// Its caches: the watches cover the namespace. A namespace not known
    /// (not named by the manager) is looked for where the watches look.
    Watched,
    /// The API server only: the watches do not cover the namespace (the
    /// policy no longer names it), so the caches show nothing of it.
    Unwatched,
}

/// Where the agent learns what `namespace` holds, under `policy`.
pub(super) fn scope_of(policy: &NamespacePolicy, namespace: &str) -> Scope {
    if !namespace.is_empty() && policy.never_allowed(namespace) {
        Scope::NeverWritten
    } else if namespace.is_empty() || policy.watches(namespace) {
        Scope::Watched
    } else {
        Scope::Unwatched
    }
}

/// What a consistent list of a mirror's namespace (its Jobs, JobSets and
/// Pods by origin UID) showed of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Read {
    /// Something of its origin UID is there.
    Standing,
    /// Nothing of its origin UID is there.
    Nothing,
    /// The list did not answer: nothing is known.
    Failed(ReadFailure),
}

/// Why a list did not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ReadFailure {
    /// The API server refused it (403): the agent may not read there.
    Forbidden(String),
    /// It failed otherwise: the network, a timeout, the API server.
    Other(String),
}

/// Why a list failed with `error`: a refusal, or another failure.
pub(super) fn read_failure(error: &kube::Error) -> ReadFailure {
    match error {
        kube::Error::Api(status) if status.code == 403 => {
            ReadFailure::Forbidden(status.message.clone())
        }
        error => ReadFailure::Other(error.to_string()),
    }
}

/// Whether a mirror being deleted is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Confirmation {
    /// Confirmed: `MirrorGone` may be sent.
    Gone,
    /// Something of it is still there: the deletion goes on.
    Standing,
    /// Not known, so not gone: a later pass reads again. Why, naming the
    /// namespace, for the log.
    Unknown(String),
}

/// Whether a mirror of `namespace` (seen from `scope`) is gone, given the
/// read of the API server made for it (`None`: none was made).
pub(super) fn confirmation(namespace: &str, scope: Scope, read: Option<&Read>) -> Confirmation {
    match (scope, read) {
        (Scope::NeverWritten, _) => Confirmation::Gone,
        (_, Some(Read::Nothing)) => Confirmation::Gone,
        (_, Some(Read::Standing)) => Confirmation::Standing,
        (_, None) => Confirmation::Unknown(format!(
            "namespace {namespace} was not read; the mirror is not confirmed gone"
        )),
        (_, Some(Read::Failed(failure))) => {
            Confirmation::Unknown(unread(namespace, scope, failure))
        }
    }
}

/// Why nothing is concluded of the mirrors of `namespace` (seen from
/// `scope`) whose list failed, for the log.
pub(super) fn unread(namespace: &str, scope: Scope, failure: &ReadFailure) -> String {
    let outside = match scope {
        Scope::Unwatched => {
            " (the namespace is outside the agent's namespace policy and watches; give the agent read access there until its mirrors are gone)"
        }
        Scope::Watched | Scope::NeverWritten => "",
    };
    match failure {
        ReadFailure::Forbidden(message) => format!(
            "the agent may not list Jobs and Pods in namespace {namespace}: {message}; the mirror is not confirmed gone{outside}"
        ),
        ReadFailure::Other(message) => format!(
            "listing Jobs and Pods in namespace {namespace} failed: {message}; the mirror is not confirmed gone{outside}"
        ),
    }
}

/// What an apply into `namespace`, which the policy refuses (`refusal`,
/// the sentence the manager Job shows), comes to, given a direct read of
/// the object of the mirror's name there: its metadata (`Ok(None)`: there
/// is none), or why the read failed.
///
/// A mirror of this origin and origin UID already there was written while
/// an earlier policy allowed the namespace, and it runs: the apply is
/// answered as taken (`Ok`), and the mirror is left as it is — not updated
/// to the apply's revision, no new mirror written, as the policy wants. A
/// refusal would be permanent and fail the manager Job while its Pods run
/// on; a mirror held but not updated is the lesser surprise, and the
/// manager's delete still removes it. Without such a mirror the apply is
/// refused as before (`NAMESPACE_NOT_ALLOWED`).
///
/// A read that failed tells neither. Where the agent may not read the
/// namespace at all (403: with the chart, no Role there — the usual case of
/// a namespace never in the policy), the refusal stands as before, saying
/// that the agent could not look: were it only retried, a Job sent to a
/// namespace the worker never allowed would wait forever instead of
/// failing with the reason. Any other failure (the network, a timeout, the
/// API server) can clear: the apply is refused for a reason that can, and
/// tried again.
pub(super) fn resent_outside_policy(
    namespace: &str,
    refusal: String,
    (origin, origin_uid): (&str, &str),
    found: Result<Option<ObjectMeta>, ApplyFailure>,
) -> Result<(), ApplyFailure> {
    let labelled = |meta: &ObjectMeta, key: &str, value: &str| {
        meta.labels
            .as_ref()
            .and_then(|l| l.get(key))
            .map(String::as_str)
            == Some(value)
    };
    match found {
        Ok(Some(meta))
            if labelled(&meta, ORIGIN_LABEL, origin)
                && labelled(&meta, ORIGIN_UID_LABEL, origin_uid) =>
        {
            Ok(())
        }
        Ok(_) => Err(ApplyFailure::Refused(
            RejectReason::NamespaceNotAllowed,
            refusal,
        )),
        Err(ApplyFailure::Refused(RejectReason::Forbidden, message)) => Err(ApplyFailure::Refused(
            RejectReason::NamespaceNotAllowed,
            format!(
                "{refusal} (the agent may not read namespace {namespace} either, so it cannot tell whether a mirror of this Job still runs there: {message})"
            ),
        )),
        Err(ApplyFailure::Refused(reason, message)) => {
            let reason = match reason.is_permanent() {
                true => RejectReason::Unavailable,
                false => reason,
            };
            Err(ApplyFailure::Refused(
                reason,
                format!(
                    "namespace {namespace} is outside the agent's namespace policy, and whether a mirror of this Job is still there could not be read: {message}"
                ),
            ))
        }
        Err(wait) => Err(wait),
    }
}

#[cfg(test)]
#[path = "reads_tests.rs"]
mod tests;
