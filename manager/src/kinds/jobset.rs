//! `jobset.x-k8s.io/v1alpha2` JobSet: a group of replicated Jobs, relayed
//! as one.

use std::collections::BTreeMap;

use jobrelay_kinds::jobset::{JobSet, JobSetSpec, JobSetStatus};
use jobrelay_proto::kinds::{JOBSET, KindName};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::{MirrorError, RelayedKind, jobset_status, mirror_metadata, without_own_keys};

impl RelayedKind for JobSet {
    const NAME: KindName = JOBSET;

    fn managed_by(&self) -> Option<&str> {
        self.spec.as_ref().and_then(|s| s.managed_by.as_deref())
    }

    fn suspended(&self) -> bool {
        JobSet::suspended(self)
    }

    fn is_finished(&self) -> bool {
        JobSet::is_finished(self)
    }

    fn finished_at(&self) -> Option<Timestamp> {
        self.status
            .iter()
            .flat_map(|s| &s.conditions)
            .filter(|c| (c.type_ == "Completed" || c.type_ == "Failed") && c.status == "True")
            .map(|c| c.last_transition_time.0)
            .max()
    }

    /// The JobSet controller deletes a finished JobSet after its
    /// `ttlSecondsAfterFinished`, but none runs one that jobrelay manages.
    fn ttl_on_manager(&self) -> Option<std::time::Duration> {
        let ttl = self.spec.as_ref()?.ttl_seconds_after_finished?;
        Some(std::time::Duration::from_secs(u64::try_from(ttl).ok()?))
    }

    /// Without field ownership or its Job templates (read from the API
    /// server when a mirror is sent).
    fn for_cache(&mut self) {
        jobrelay_process::cache::trim(self);
        if let Some(spec) = self.spec.as_mut() {
            for job in &mut spec.replicated_jobs {
                job.template = Default::default();
            }
        }
    }

    fn is_whole(&self) -> bool {
        self.spec.as_ref().is_some_and(|s| {
            s.replicated_jobs
                .iter()
                .all(|job| job.template.spec.is_some())
        })
    }

    fn pod_groups(&self) -> Vec<jobrelay_kinds::room::PodGroup> {
        jobrelay_kinds::room::demand::of_jobset(self)
    }

    type Status = JobSetStatus;

    fn copied(worker_status: &[u8]) -> serde_json::Result<JobSetStatus> {
        jobset_status::copied(worker_status)
    }

    fn finish_time(copied: &JobSetStatus) -> Option<Timestamp> {
        jobset_status::finish_time(copied)
    }

    fn runs_pods(status: &JobSetStatus) -> bool {
        jobset_status::runs_pods(status)
    }

    /// Its status counts Jobs, not Pods, so whether a Pod started is read
    /// from each replicated Job's counts.
    fn pods_started(status: &JobSetStatus) -> bool {
        jobset_status::pods_started(status)
    }

    fn shown(&self) -> JobSetStatus {
        self.status
            .as_ref()
            .map(jobset_status::pick)
            .unwrap_or_default()
    }

    fn status_patch(&self, copied: &JobSetStatus) -> Option<Value> {
        (self.shown() != *copied).then(|| jobset_status::patch_body(copied))
    }

    fn after_suspension(last: &JobSetStatus) -> JobSetStatus {
        jobset_status::after_suspension(last)
    }

    fn failed(shown: &JobSetStatus, reason: &str, message: &str, now: Timestamp) -> JobSetStatus {
        jobset_status::failed(shown, reason, message, now)
    }

    /// Same namespace and name; the origin labels on the JobSet, on every
    /// replicated Job's template (so its Jobs carry them) and on every pod
    /// template; no `managedBy` (the worker's JobSet controller runs it) or
    /// `ttlSecondsAfterFinished` (retention is jobrelay's).
    fn mirror(&self, origin: &str) -> Result<JobSet, MirrorError> {
        let (metadata, origin_labels) = mirror_metadata(self, origin)?;
        let spec = self.spec.as_ref().ok_or(MirrorError::Missing {
            kind: "JobSet",
            field: "spec",
        })?;
        // Only jobrelay's own labels of its own prefix, on every template.
        let labelled = |metadata: &mut ObjectMeta| {
            without_own_keys(metadata);
            metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .extend(origin_labels.clone());
        };
        let mut replicated_jobs = spec.replicated_jobs.clone();
        for job in &mut replicated_jobs {
            labelled(job.template.metadata.get_or_insert_with(Default::default));
            if let Some(job_spec) = job.template.spec.as_mut() {
                labelled(
                    job_spec
                        .template
                        .metadata
                        .get_or_insert_with(Default::default),
                );
            }
        }
        Ok(JobSet {
            metadata,
            spec: Some(JobSetSpec {
                replicated_jobs,
                suspend: spec.suspend,
                managed_by: None,
                ttl_seconds_after_finished: None,
                rest: spec.rest.clone(),
            }),
            status: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::life::*;
    use crate::job::lifecycle::*;
    use jobrelay_proto::wire::{ORIGIN_LABEL, ORIGIN_UID_LABEL, REVISION_ANNOTATION};

    fn manager_jobset() -> JobSet {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "train", "namespace": "ml", "uid": "uid-1", "generation": 2,
                "labels": {"team": "vision", "kueue.x-k8s.io/queue-name": "batch"},
                "finalizers": ["jobrelay.dev/remote-cleanup"],
                "managedFields": [{"manager": "kubectl"}],
            },
            "spec": {
                "managedBy": "jobrelay.dev/manager",
                "ttlSecondsAfterFinished": 60,
                "suspend": true,
                "failurePolicy": {"maxRestarts": 2},
                "replicatedJobs": [
                    {"name": "leader", "replicas": 1, "template": {"spec": {"template": {"spec": {
                        "restartPolicy": "Never", "containers": [{"name": "c", "image": "t:1"}]}}}}},
                    {"name": "workers", "replicas": 3, "template": {
                        "metadata": {"labels": {"role": "worker"}},
                        "spec": {"template": {"metadata": {"labels": {"app": "trainer"}}, "spec": {
                        "restartPolicy": "Never", "containers": [{"name": "c", "image": "t:1"}]}}}}},
                ],
            },
            "status": {"restarts": 0},
        }))
        .unwrap()
    }

    #[test]
    fn the_origin_labels_reach_every_job_and_pod_template_and_nothing_else_crosses() {
        let mirror = manager_jobset().mirror("hub").unwrap();
        let labels = mirror.metadata.labels.as_ref().unwrap();
        assert_eq!(
            (
                labels[ORIGIN_LABEL].as_str(),
                labels[ORIGIN_UID_LABEL].as_str()
            ),
            ("hub", "uid-1")
        );
        assert_eq!(labels["kueue.x-k8s.io/queue-name"], "batch");
        assert!(mirror.metadata.uid.is_none() && mirror.metadata.finalizers.is_none());
        assert!(mirror.metadata.managed_fields.is_none());
        assert_eq!(
            mirror.metadata.annotations.as_ref().unwrap()[REVISION_ANNOTATION],
            "2"
        );
        let spec = mirror.spec.as_ref().unwrap();
        assert!(spec.managed_by.is_none() && spec.ttl_seconds_after_finished.is_none());
        assert_eq!(spec.suspend, Some(true), "suspend follows the manager's");
        assert_eq!(spec.rest["failurePolicy"]["maxRestarts"], 2);
        for job in &spec.replicated_jobs {
            let job_labels = job
                .template
                .metadata
                .as_ref()
                .unwrap()
                .labels
                .as_ref()
                .unwrap();
            assert_eq!(job_labels[ORIGIN_UID_LABEL], "uid-1", "{}", job.name);
            let pod_labels = job
                .template
                .spec
                .as_ref()
                .unwrap()
                .template
                .metadata
                .as_ref();
            let pod_labels = pod_labels.unwrap().labels.as_ref().unwrap();
            assert_eq!(pod_labels[ORIGIN_LABEL], "hub", "{}", job.name);
            assert_eq!(pod_labels[ORIGIN_UID_LABEL], "uid-1", "{}", job.name);
        }
        let workers = &spec.replicated_jobs[1];
        assert_eq!(workers.rest["replicas"], 3);
        assert_eq!(
            workers
                .template
                .metadata
                .as_ref()
                .unwrap()
                .labels
                .as_ref()
                .unwrap()["role"],
            "worker"
        );
        assert!(mirror.status.is_none());
    }

    #[test]
    fn jobrelays_own_labels_a_user_wrote_on_any_template_never_reach_the_worker() {
        let mut jobset = manager_jobset();
        let forged = serde_json::json!({
            "jobrelay.dev/manager-instance": "another-installation",
            "jobrelay.dev/origin-uid": "a-victims-uid",
            "jobrelay.dev/anything": "x",
        });
        let forged: BTreeMap<String, String> = serde_json::from_value(forged).unwrap();
        jobset
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .extend(forged.clone());
        jobset.metadata.annotations = Some(forged.clone());
        let spec = jobset.spec.as_mut().unwrap();
        for job in &mut spec.replicated_jobs {
            let job_meta = job.template.metadata.get_or_insert_with(Default::default);
            job_meta.labels = Some(forged.clone());
            job_meta.annotations = Some(forged.clone());
            let pod = &mut job.template.spec.as_mut().unwrap().template;
            let pod_meta = pod.metadata.get_or_insert_with(Default::default);
            pod_meta.labels = Some(forged.clone());
            pod_meta.annotations = Some(forged.clone());
        }
        let mirror = jobset.mirror("hub").unwrap();
        let own_only = |metadata: &ObjectMeta, what: &str| {
            for (key, value) in metadata
                .labels
                .iter()
                .chain(&metadata.annotations)
                .flatten()
            {
                let ours = [ORIGIN_LABEL, ORIGIN_UID_LABEL, REVISION_ANNOTATION];
                if key.starts_with("jobrelay.dev/") {
                    assert!(ours.contains(&key.as_str()), "{what}: {key}={value}");
                }
            }
            let labels = metadata.labels.as_ref().unwrap();
            assert_eq!(labels[ORIGIN_UID_LABEL], "uid-1", "{what}");
        };
        own_only(&mirror.metadata, "the JobSet");
        for job in &mirror.spec.as_ref().unwrap().replicated_jobs {
            own_only(job.template.metadata.as_ref().unwrap(), &job.name);
            let pod = &job.template.spec.as_ref().unwrap().template;
            own_only(pod.metadata.as_ref().unwrap(), &job.name);
        }
    }

    #[test]
    fn a_jobset_is_relayed_suspended_finished_and_cached_like_a_job() {
        let mut jobset = manager_jobset();
        assert!(is_relayed(&jobset));
        assert_eq!(lifecycle(&jobset), Lifecycle::Suspended);
        assert!(is_whole(&jobset));
        let mut cached = jobset.clone();
        cached.for_cache();
        assert!(!is_whole(&cached));
        assert_eq!(cached.spec.as_ref().unwrap().replicated_jobs.len(), 2);
        jobset.status = serde_json::from_value(serde_json::json!({"terminalState": "Failed",
            "conditions": [{"type": "Failed", "status": "True", "reason": "r", "message": "m",
            "lastTransitionTime": "2026-11-27T10:00:00Z"}]}))
        .unwrap();
        assert_eq!(lifecycle(&jobset), Lifecycle::Finished);
        assert_eq!(
            jobset.ttl_on_manager(),
            Some(std::time::Duration::from_secs(60)),
            "no JobSet controller on the manager deletes it"
        );
        let config = crate::config::Config::default();
        let mut released = jobset.clone();
        released.metadata.finalizers = None;
        let now = Timestamp::now();
        let step = next_step(&released, None, KueueAsks::Nothing, &config, now);
        let Step::Expire { keep, .. } = step else {
            panic!("a finished JobSet expires: {step:?}");
        };
        assert_eq!(keep, Some(std::time::Duration::from_secs(60)));
        assert_eq!(
            jobset.mirror("hub").map(|_| ()).map_err(|e| e.to_string()),
            Ok(())
        );
        jobset.metadata.uid = None;
        assert_eq!(
            jobset.mirror("hub").unwrap_err().to_string(),
            "JobSet has no metadata.uid"
        );
    }
}
