//! A Job's outcome read from its conditions: plain functions over the Job.

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;

/// The Job's condition `type_`, if it is True.
pub fn condition<'a>(
    job: &'a Job,
    type_: &str,
) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Whether the Job has condition `type_` = True.
pub fn has_condition(job: &Job, type_: &str) -> bool {
    condition(job, type_).is_some()
}

/// `Complete` or `Failed` if the Job has that condition.
pub fn outcome(job: &Job) -> Option<&'static str> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    ["Complete", "Failed"].into_iter().find(|kind| {
        conditions
            .iter()
            .any(|c| c.type_ == *kind && c.status == "True")
    })
}

/// A Job's outcome in words, with the reason and message of its condition
/// (what a failed wait shows).
pub(super) fn explain(job: &Job) -> String {
    let Some(kind) = outcome(job) else {
        return "no outcome yet".into();
    };
    let condition = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == kind));
    match condition {
        Some(c) => format!(
            "{kind} ({}: {}; uid {})",
            c.reason.as_deref().unwrap_or(""),
            c.message.as_deref().unwrap_or(""),
            job.uid().unwrap_or_default()
        ),
        None => kind.into(),
    }
}
