//! `jobset.x-k8s.io/v1alpha2` JobSet: a group of replicated Jobs, mirrored
//! as one. Its child Jobs and their Pods carry the origin labels too (the
//! manager puts them on every Job and pod template of it), so the agent's
//! watches see them, and a JobSet is confirmed gone only once it, every
//! child Job and every Pod are.

use jobrelay_kinds::jobset::{JobSet, JobSetSpec};
use jobrelay_proto::kinds::{JOBSET, KindName};
use jobrelay_proto::v1::MirrorPhase;

use super::{MirrorKind, Prepare};

impl MirrorKind for JobSet {
    const NAME: KindName = JOBSET;

    fn phase(&self) -> MirrorPhase {
        if self.metadata.deletion_timestamp.is_some() {
            return MirrorPhase::Deleting;
        }
        if self.condition("Completed") {
            MirrorPhase::Succeeded
        } else if self.condition("Failed") {
            MirrorPhase::Failed
        } else if self.condition("Suspended") || JobSet::suspended(self) {
            MirrorPhase::Suspended
        } else if running(self) {
            MirrorPhase::Running
        } else {
            MirrorPhase::Pending
        }
    }

    fn is_finished(&self) -> bool {
        JobSet::is_finished(self)
    }

    /// Of its spec only `suspend` is kept: the Job templates are most of a
    /// JobSet.
    fn keep_what_is_reported(&mut self) {
        if let Some(spec) = self.spec.as_mut() {
            *spec = JobSetSpec {
                suspend: spec.suspend,
                ..JobSetSpec::default()
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
        JobSet::suspended(self)
    }

    /// Nothing: the JobSet controller suspends its child Jobs itself, and a
    /// suspended JobSet takes a new pod template.
    fn before_update(_existing: &JobSet, _desired: &JobSet) -> Vec<Prepare> {
        Vec::new()
    }

    fn keep_what_kueue_owns(desired: &mut JobSet, existing: &JobSet) {
        if let (Some(desired), Some(existing)) = (desired.spec.as_mut(), existing.spec.as_ref()) {
            desired.suspend = existing.suspend;
            desired.replicated_jobs = existing.replicated_jobs.clone();
        }
    }
}

/// Whether any of its replicated Jobs has an active or ready Pod.
fn running(jobset: &JobSet) -> bool {
    let counted = |entry: &serde_json::Value, field: &str| {
        entry
            .get(field)
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0)
            > 0
    };
    jobset
        .status
        .as_ref()
        .and_then(|s| s.rest.get("replicatedJobsStatus"))
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .any(|entry| counted(entry, "active") || counted(entry, "ready"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobset(spec: serde_json::Value, status: serde_json::Value) -> JobSet {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": spec,
            "status": status,
        }))
        .unwrap()
    }

    fn condition(type_: &str) -> serde_json::Value {
        serde_json::json!({"type": type_, "status": "True", "reason": "r", "message": "m",
            "lastTransitionTime": "2026-11-27T10:00:00Z"})
    }

    #[test]
    fn phases_follow_the_jobset_controllers_status() {
        let plain = serde_json::json!({"replicatedJobs": []});
        assert_eq!(
            jobset(plain.clone(), serde_json::json!({})).phase(),
            MirrorPhase::Pending
        );
        let running = serde_json::json!({"replicatedJobsStatus": [
            {"name": "leader", "active": 0, "ready": 0}, {"name": "workers", "active": 3, "ready": 1}]});
        assert_eq!(jobset(plain.clone(), running).phase(), MirrorPhase::Running);
        let completed = serde_json::json!({"conditions": [condition("Completed")], "terminalState": "Completed"});
        assert_eq!(
            jobset(plain.clone(), completed).phase(),
            MirrorPhase::Succeeded
        );
        let failed = serde_json::json!({"conditions": [condition("Failed")]});
        assert_eq!(jobset(plain, failed).phase(), MirrorPhase::Failed);
        let asked = jobset(serde_json::json!({"suspend": true}), serde_json::json!({}));
        assert_eq!(asked.phase(), MirrorPhase::Suspended);
    }

    #[test]
    fn a_cached_jobset_keeps_suspend_and_drops_its_job_templates() {
        let mut cached = jobset(
            serde_json::json!({"suspend": true, "network": {"enableDNSHostnames": true},
                "replicatedJobs": [{"name": "leader", "replicas": 1, "template": {}}]}),
            serde_json::json!({"restarts": 2}),
        );
        let status = cached.status.clone();
        cached.keep_what_is_reported();
        let spec = cached.spec.as_ref().unwrap();
        assert_eq!(spec.suspend, Some(true));
        assert!(spec.replicated_jobs.is_empty() && spec.rest.is_empty());
        assert_eq!(cached.status, status);
    }

    #[test]
    fn kueue_on_the_worker_keeps_its_suspend_and_job_templates() {
        let existing = jobset(
            serde_json::json!({"suspend": false, "replicatedJobs": [{"name": "leader", "replicas": 1,
                "template": {"spec": {"template": {"spec": {"nodeSelector": {"pool": "a"}, "containers": []}}}}}]}),
            serde_json::json!({}),
        );
        let mut desired = jobset(
            serde_json::json!({"suspend": true, "failurePolicy": {"maxRestarts": 3},
                "replicatedJobs": [{"name": "leader", "replicas": 1, "template": {}}]}),
            serde_json::json!({}),
        );
        JobSet::keep_what_kueue_owns(&mut desired, &existing);
        let spec = desired.spec.as_ref().unwrap();
        assert_eq!(spec.suspend, Some(false));
        assert_eq!(
            spec.replicated_jobs,
            existing.spec.as_ref().unwrap().replicated_jobs
        );
        assert_eq!(
            spec.rest["failurePolicy"]["maxRestarts"], 3,
            "the rest is applied"
        );
        assert!(JobSet::before_update(&existing, &desired).is_empty());
    }
}
