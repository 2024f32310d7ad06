//! A manager Job as the plugin shows it: whether jobrelay relays it, the
//! status jobrelay copied onto it from its mirror, and jobrelay's marks on
//! it (its annotations and the remote-cleanup finalizer).

use jobrelay_proto::wire::{MANAGED_BY, REMOTE_CLEANUP_FINALIZER};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

/// Whether jobrelay relays the Job: its `spec.managedBy` is jobrelay's.
pub fn is_relayed(job: &Job) -> bool {
    managed_by(job) == Some(MANAGED_BY)
}

/// The Job's `spec.managedBy`.
pub fn managed_by(job: &Job) -> Option<&str> {
    job.spec.as_ref().and_then(|s| s.managed_by.as_deref())
}

/// The value of one of the Job's annotations.
pub fn annotation<'a>(job: &'a Job, key: &str) -> Option<&'a str> {
    job.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Whether jobrelay's remote-cleanup finalizer holds the Job.
pub fn has_finalizer(job: &Job) -> bool {
    job.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == REMOTE_CLEANUP_FINALIZER)
}

/// When the Job was created.
pub fn created(job: &Job) -> Option<Timestamp> {
    job.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// Where the manager Job stands, from its own status (which jobrelay copies
/// from the mirror) and `spec.suspend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Phase {
    /// Not started: no Pod has run anywhere yet.
    Pending,
    Running,
    Suspended,
    /// `SuccessCriteriaMet`: succeeding, its last Pods ending.
    Completing,
    /// `FailureTarget`: failing, its last Pods ending.
    Failing,
    Complete,
    Failed,
}

/// The manager Job's status as the STATUS column and `describe` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    pub phase: Phase,
    pub active: i32,
    pub ready: i32,
    pub succeeded: i32,
    pub failed: i32,
    pub terminating: i32,
    /// The reason and message of the condition that set the phase
    /// (`Failed`, `FailureTarget`, `Complete`…), if one did.
    pub reason: Option<String>,
    pub message: Option<String>,
    /// Being deleted (`metadata.deletionTimestamp` set).
    pub deleting: bool,
}

impl JobStatus {
    /// `Running (2 active, 0 succeeded, 0 failed)`; `Deleting, ` first
    /// while the Job is being deleted.
    pub fn summary(&self) -> String {
        let deleting = match self.deleting {
            true => "Deleting, ",
            false => "",
        };
        format!(
            "{deleting}{:?} ({} active, {} succeeded, {} failed)",
            self.phase, self.active, self.succeeded, self.failed
        )
    }
}

/// The manager Job's status.
pub fn status(job: &Job) -> JobStatus {
    let status = job.status.clone().unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    let holds = |type_: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
    };
    let suspended = job.spec.as_ref().and_then(|s| s.suspend) == Some(true);
    let active = status.active.unwrap_or(0);
    let succeeded = status.succeeded.unwrap_or(0);
    let failed = status.failed.unwrap_or(0);
    let (phase, condition) = if let Some(c) = holds("Failed") {
        (Phase::Failed, Some(c))
    } else if let Some(c) = holds("Complete") {
        (Phase::Complete, Some(c))
    } else if let Some(c) = holds("FailureTarget") {
        (Phase::Failing, Some(c))
    } else if let Some(c) = holds("SuccessCriteriaMet") {
        (Phase::Completing, Some(c))
    } else if suspended {
        (Phase::Suspended, holds("Suspended"))
    } else if status.start_time.is_none() && active + succeeded + failed == 0 {
        (Phase::Pending, None)
    } else {
        (Phase::Running, None)
    };
    JobStatus {
        phase,
        active,
        ready: status.ready.unwrap_or(0),
        succeeded,
        failed,
        terminating: status.terminating.unwrap_or(0),
        reason: condition.and_then(|c| c.reason.clone()),
        message: condition.and_then(|c| c.message.clone()),
        deleting: job.metadata.deletion_timestamp.is_some(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// A relayed Job in namespace `ml` named `name`, with `extra` merged
    /// over it (objects merged key by key).
    pub(crate) fn job(name: &str, extra: Value) -> Job {
        let mut base = json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": "ml",
                "uid": format!("uid-{name}"),
                "creationTimestamp": "2026-11-28T11:55:00Z",
            },
            "spec": {"managedBy": MANAGED_BY, "template": {}},
        });
        merge(&mut base, extra);
        serde_json::from_value(base).expect("a Job")
    }

    fn merge(base: &mut Value, extra: Value) {
        match (base, extra) {
            (Value::Object(base), Value::Object(extra)) => {
                for (key, value) in extra {
                    merge(base.entry(key).or_insert(Value::Null), value);
                }
            }
            (base, extra) => *base = extra,
        }
    }

    fn condition(type_: &str, reason: &str) -> Value {
        json!({"type": type_, "status": "True", "reason": reason, "message": format!("{reason} said so")})
    }

    #[test]
    fn the_phase_follows_the_conditions_then_suspend_then_whether_it_started() {
        let cases = [
            (json!({}), Phase::Pending),
            (
                json!({"status": {"startTime": "2026-11-28T11:56:00Z", "active": 2}}),
                Phase::Running,
            ),
            (json!({"status": {"active": 1}}), Phase::Running),
            (json!({"spec": {"suspend": true}}), Phase::Suspended),
            (
                json!({"status": {"conditions": [condition("Complete", "CompletionsReached")]}}),
                Phase::Complete,
            ),
            (
                json!({"status": {"conditions": [condition("FailureTarget", "BackoffLimitExceeded")]}}),
                Phase::Failing,
            ),
            (
                json!({"status": {"conditions": [condition("SuccessCriteriaMet", "CompletionsReached")]}}),
                Phase::Completing,
            ),
            (
                json!({"spec": {"suspend": true}, "status": {"conditions": [
                    condition("FailureTarget", "RemoteRejected"), condition("Failed", "RemoteRejected")]}}),
                Phase::Failed,
            ),
            (
                json!({"status": {"conditions": [{"type": "Failed", "status": "False"}], "active": 1}}),
                Phase::Running,
            ),
        ];
        for (extra, phase) in cases {
            let shown = status(&job("train", extra.clone()));
            assert_eq!(shown.phase, phase, "{extra}");
        }
    }

    #[test]
    fn a_failed_job_says_why_and_a_deleted_one_says_so() {
        let failed = job(
            "train",
            json!({
                "metadata": {"deletionTimestamp": "2026-11-28T12:00:00Z"},
                "status": {"failed": 3, "conditions": [condition("Failed", "RemoteJobLost")]},
            }),
        );
        let shown = status(&failed);
        assert_eq!(shown.reason.as_deref(), Some("RemoteJobLost"));
        assert_eq!(shown.message.as_deref(), Some("RemoteJobLost said so"));
        assert_eq!(
            shown.summary(),
            "Deleting, Failed (0 active, 0 succeeded, 3 failed)"
        );
    }

    #[test]
    fn relayed_means_managed_by_jobrelay() {
        assert!(is_relayed(&job("train", json!({}))));
        let other = job(
            "train",
            json!({"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}),
        );
        assert!(!is_relayed(&other));
        assert_eq!(managed_by(&other), Some("kueue.x-k8s.io/multikueue"));
    }
}
