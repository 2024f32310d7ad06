//! batch/v1 Job facts both binaries judge the same way.

use jobrelay_proto::wire::ends_job;
use k8s_openapi::api::batch::v1::Job;

/// `Complete` or `Failed`. A Job only on the way to one
/// (`SuccessCriteriaMet`, `FailureTarget`) is not finished.
pub fn finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| ends_job(&c.type_, &c.status))
}
