//! `batch/v1` Job, the first kind the agent mirrors.

use jobrelay_proto::kinds::{JOB, KindName};
use jobrelay_proto::v1::MirrorPhase;
use k8s_openapi::api::batch::v1::{Job, JobSpec};

use super::{MirrorKind, Prepare};

impl MirrorKind for Job {
    const NAME: KindName = JOB;

    fn phase(&self) -> MirrorPhase {
        if self.metadata.deletion_timestamp.is_some() {
            return MirrorPhase::Deleting;
        }
        let status = self.status.as_ref();
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
        } else if condition("Suspended") || self.suspended() {
            // Asked to suspend, before the Job controller said so too.
            MirrorPhase::Suspended
        } else if status.and_then(|s| s.active).unwrap_or(0) > 0 {
            MirrorPhase::Running
        } else {
            MirrorPhase::Pending
        }
    }

    /// `Complete` or `Failed`. A mirror only on the way to one
    /// (`SuccessCriteriaMet`, `FailureTarget`) is not: one whose Pod
    /// succeeded as it was suspended (its start time cleared) can complete
    /// only once a resume gives it a start time again.
    fn is_finished(&self) -> bool {
        jobrelay_kinds::job::finished(self)
    }

    /// Of its spec only `suspend` is kept: the pod template is most of a Job.
    fn keep_what_is_reported(&mut self) {
        if let Some(spec) = self.spec.as_mut() {
            *spec = JobSpec {
                suspend: spec.suspend,
                ..JobSpec::default()
            };
        }
    }

    fn status_json(&self) -> serde_json::Result<Vec<u8>> {
        match &self.status {
            Some(status) => serde_json::to_vec(status),
            None => Ok(b"{}".to_vec()),
        }
    }

    fn suspended(&self) -> bool {
        self.spec.as_ref().and_then(|s| s.suspend) == Some(true)
    }

    /// A mirror being suspended is suspended, then has its start time
    /// cleared, so this and any later revision may change its pod template.
    fn before_update(existing: &Job, desired: &Job) -> Vec<Prepare> {
        let started = existing
            .status
            .as_ref()
            .is_some_and(|s| s.start_time.is_some());
        if !desired.suspended() || !started {
            return Vec::new();
        }
        if existing.suspended() {
            vec![Prepare::ClearStartTime]
        } else {
            vec![Prepare::Suspend, Prepare::ClearStartTime]
        }
    }

    fn keep_what_kueue_owns(desired: &mut Job, existing: &Job) {
        if let (Some(desired), Some(existing)) = (desired.spec.as_mut(), existing.spec.as_ref()) {
            desired.suspend = existing.suspend;
            desired.template = existing.template.clone();
        }
    }
}

#[cfg(test)]
#[path = "job_tests.rs"]
mod tests;
