//! What a manager Job looks like on a worker: the stripped copy the agent
//! applies.

use std::collections::BTreeMap;

use jobrelay_proto::wire::{ORIGIN_LABEL, ORIGIN_UID_LABEL, OWNER_ANNOTATION, REVISION_ANNOTATION};
use k8s_openapi::api::batch::v1::Job;
use kube::api::ObjectMeta;

use crate::job::life::revision;

/// Pod-template labels the manager cluster's API server derived from the
/// manager Job's UID; the worker's API server sets its own.
const CONTROLLER_LABELS: [&str; 4] = [
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
];

/// Why a Job cannot be mirrored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorError {
    #[error("Job has no {0}")]
    Missing(&'static str),
}

/// The Job to apply on the worker: same namespace and name, the origin labels
/// on the Job and its pod template, and nothing that must not cross clusters
/// (owner references, UID, resource version, managed fields, status, selector,
/// controller labels, `managedBy`, `ttlSecondsAfterFinished`). `suspend`
/// follows the manager Job's, so a suspended Job's mirror runs no Pods.
pub fn mirror_job(job: &Job, origin: &str) -> Result<Job, MirrorError> {
    let name = job
        .metadata
        .name
        .clone()
        .ok_or(MirrorError::Missing("metadata.name"))?;
    let namespace = job
        .metadata
        .namespace
        .clone()
        .ok_or(MirrorError::Missing("metadata.namespace"))?;
    let uid = job
        .metadata
        .uid
        .clone()
        .ok_or(MirrorError::Missing("metadata.uid"))?;
    let mut spec = job.spec.clone().ok_or(MirrorError::Missing("spec"))?;

    let origin_labels = [(ORIGIN_LABEL, origin), (ORIGIN_UID_LABEL, uid.as_str())];
    let mut labels = job.metadata.labels.clone().unwrap_or_default();
    labels.extend(origin_labels.map(|(k, v)| (k.to_string(), v.to_string())));
    let mut annotations = job.metadata.annotations.clone().unwrap_or_default();
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    annotations.insert(REVISION_ANNOTATION.into(), revision(job).to_string());
    if let Some(owner) = job
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
    {
        annotations.insert(
            OWNER_ANNOTATION.into(),
            format!("{}/{}", owner.kind, owner.name),
        );
    }

    spec.selector = None;
    spec.manual_selector = None;
    spec.managed_by = None;
    spec.ttl_seconds_after_finished = None;
    let template_meta = spec
        .template
        .metadata
        .get_or_insert_with(ObjectMeta::default);
    let template_labels: &mut BTreeMap<String, String> =
        template_meta.labels.get_or_insert_with(BTreeMap::new);
    for key in CONTROLLER_LABELS {
        template_labels.remove(key);
    }
    template_labels.extend(origin_labels.map(|(k, v)| (k.to_string(), v.to_string())));

    Ok(Job {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::life::*;

    fn manager_job() -> Job {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "train", "namespace": "ml", "uid": "uid-1", "resourceVersion": "42", "generation": 3,
                "labels": {"team": "vision"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "note": "kept"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly", "uid": "cj", "controller": true}],
                "managedFields": [{"manager": "kubectl"}],
                "finalizers": ["jobrelay.dev/remote-cleanup"],
            },
            "spec": {
                "managedBy": "jobrelay.dev/manager",
                "suspend": false,
                "ttlSecondsAfterFinished": 60,
                "parallelism": 2,
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "uid-1"}},
                "template": {
                    "metadata": {"labels": {
                        "app": "trainer",
                        "controller-uid": "uid-1", "batch.kubernetes.io/controller-uid": "uid-1",
                        "job-name": "train", "batch.kubernetes.io/job-name": "train",
                    }},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "trainer:1"}]},
                },
            },
            "status": {"active": 1},
        }))
        .unwrap()
    }

    #[test]
    fn strips_what_must_not_cross_clusters_and_labels_the_origin() {
        let mirror = mirror_job(&manager_job(), "hub-eu").unwrap();
        let meta = &mirror.metadata;
        assert_eq!(
            (meta.name.as_deref(), meta.namespace.as_deref()),
            (Some("train"), Some("ml"))
        );
        assert!(meta.uid.is_none() && meta.resource_version.is_none() && meta.generation.is_none());
        assert!(
            meta.owner_references.is_none()
                && meta.managed_fields.is_none()
                && meta.finalizers.is_none()
        );
        let labels = meta.labels.as_ref().unwrap();
        assert_eq!(labels[ORIGIN_LABEL], "hub-eu");
        assert_eq!(labels[ORIGIN_UID_LABEL], "uid-1");
        assert_eq!(labels["team"], "vision");
        let annotations = meta.annotations.as_ref().unwrap();
        assert_eq!(annotations[REVISION_ANNOTATION], "3");
        assert_eq!(annotations["note"], "kept");
        assert_eq!(
            annotations[OWNER_ANNOTATION], "CronJob/nightly",
            "the owner is recorded, not referenced"
        );
        assert!(!annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"));

        let spec = mirror.spec.as_ref().unwrap();
        assert!(
            spec.managed_by.is_none()
                && spec.selector.is_none()
                && spec.ttl_seconds_after_finished.is_none()
        );
        assert_eq!(
            spec.suspend,
            Some(false),
            "suspend follows the manager Job's"
        );
        assert_eq!(spec.parallelism, Some(2));
        let template_labels = spec
            .template
            .metadata
            .as_ref()
            .unwrap()
            .labels
            .as_ref()
            .unwrap();
        assert_eq!(template_labels.len(), 3, "{template_labels:?}");
        assert_eq!(template_labels["app"], "trainer");
        assert_eq!(template_labels[ORIGIN_UID_LABEL], "uid-1");
        assert_eq!(template_labels[ORIGIN_LABEL], "hub-eu");
        assert!(mirror.status.is_none());
    }

    #[test]
    fn the_cache_keeps_no_template_or_selector_and_a_cached_copy_is_not_whole() {
        let job = manager_job();
        assert!(is_whole(&job));
        let mut cached = job.clone();
        for_cache(&mut cached);
        assert!(!is_whole(&cached));
        let spec = cached.spec.as_ref().unwrap();
        assert_eq!(spec.template, Default::default());
        assert!(spec.selector.is_none());
        assert!(cached.metadata.managed_fields.is_none());
        // What the manager decides on is all still there.
        assert!(is_relayed(&cached));
        assert_eq!(lifecycle(&cached), lifecycle(&job));
        assert_eq!(revision(&cached), revision(&job));
        assert_eq!(spec.suspend, job.spec.as_ref().unwrap().suspend);
        assert_eq!(cached.metadata.labels, job.metadata.labels);
        assert_eq!(cached.status, job.status);
    }

    #[test]
    fn a_job_without_uid_cannot_be_mirrored() {
        let mut job = manager_job();
        job.metadata.uid = None;
        assert_eq!(
            mirror_job(&job, "hub").unwrap_err(),
            MirrorError::Missing("metadata.uid")
        );
    }

    #[test]
    fn lifecycle_puts_deletion_before_finish_before_suspension() {
        let mut job = manager_job();
        assert!(is_relayed(&job));
        assert_eq!(lifecycle(&job), Lifecycle::Active);
        job.spec.as_mut().unwrap().suspend = Some(true);
        assert_eq!(lifecycle(&job), Lifecycle::Suspended);
        job.status = serde_json::from_value(serde_json::json!({"conditions": [
            {"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}]}))
        .unwrap();
        assert_eq!(lifecycle(&job), Lifecycle::Finished);
        job.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
        assert_eq!(lifecycle(&job), Lifecycle::Deleting);
        assert_eq!(revision(&job), 3);
    }
}
