use super::*;
use crate::job::life::*;
use crate::job::lifecycle::*;
use jobrelay_proto::wire::{ORIGIN_LABEL, ORIGIN_UID_LABEL, OWNER_ANNOTATION, REVISION_ANNOTATION};

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
    let mirror = manager_job().mirror("hub-eu").unwrap();
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
fn jobrelays_own_keys_a_user_wrote_are_dropped_and_its_own_written_over() {
    let mut job = manager_job();
    let forged = |metadata: &mut ObjectMeta| {
        for keys in [&mut metadata.labels, &mut metadata.annotations] {
            keys.get_or_insert_with(BTreeMap::new).extend([
                (ORIGIN_UID_LABEL.to_string(), "a-victims-uid".to_string()),
                (
                    "jobrelay.dev/manager-instance".to_string(),
                    "other".to_string(),
                ),
                (REVISION_ANNOTATION.to_string(), "999".to_string()),
                (
                    "jobrelay.dev/placement-seal".to_string(),
                    "v1:x:w".to_string(),
                ),
            ]);
        }
    };
    forged(&mut job.metadata);
    forged(
        job.spec
            .as_mut()
            .unwrap()
            .template
            .metadata
            .as_mut()
            .unwrap(),
    );
    let mirror = job.mirror("hub").unwrap();
    let template = mirror.spec.unwrap().template.metadata.unwrap();
    for (what, metadata) in [
        ("the Job", &mirror.metadata),
        ("its pod template", &template),
    ] {
        let labels = metadata.labels.clone().unwrap_or_default();
        let annotations = metadata.annotations.clone().unwrap_or_default();
        assert_eq!(labels[ORIGIN_UID_LABEL], "uid-1", "{what}");
        assert!(
            !labels.contains_key("jobrelay.dev/manager-instance"),
            "{what}"
        );
        assert!(!annotations.contains_key(ORIGIN_UID_LABEL), "{what}");
        assert!(
            !annotations.contains_key("jobrelay.dev/placement-seal"),
            "{what}"
        );
    }
    let annotations = mirror.metadata.annotations.unwrap();
    assert_eq!(
        annotations[REVISION_ANNOTATION], "3",
        "jobrelay's own revision"
    );
    let template_annotations = template.annotations.unwrap_or_default();
    assert!(!template_annotations.contains_key(REVISION_ANNOTATION));
}

#[test]
fn the_cache_keeps_no_template_or_selector_and_a_cached_copy_is_not_whole() {
    let job = manager_job();
    assert!(is_whole(&job));
    let mut cached = job.clone();
    cached.for_cache();
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
fn a_job_placed_again_asks_its_mirror_only_for_what_is_left() {
    use crate::kinds::carried::CARRIED_ANNOTATION;
    let mut job = manager_job();
    let spec = job.spec.as_mut().unwrap();
    (spec.completions, spec.backoff_limit) = (Some(4), Some(3));
    job.status = Some(JobStatus {
        succeeded: Some(3),
        failed: Some(1),
        ..JobStatus::default()
    });
    let carried = job.carried().expect("three of four succeeded, one failed");
    assert_eq!(carried, "succeeded=3,failed=1");
    let annotations = job.metadata.annotations.get_or_insert_default();
    annotations.insert(CARRIED_ANNOTATION.into(), carried);
    let mirror = job.mirror("hub-eu").unwrap().spec.unwrap();
    assert_eq!(
        (mirror.completions, mirror.parallelism, mirror.backoff_limit),
        (Some(1), Some(1), Some(2))
    );
    let annotations = job.metadata.annotations.get_or_insert_default();
    annotations.insert(CARRIED_ANNOTATION.into(), "succeeded=lots".into());
    let error = job.mirror("hub-eu").unwrap_err().to_string();
    assert!(error.contains(CARRIED_ANNOTATION), "{error}");
}

#[test]
fn a_job_without_uid_cannot_be_mirrored() {
    let mut job = manager_job();
    job.metadata.uid = None;
    assert_eq!(
        job.mirror("hub").unwrap_err().to_string(),
        "Job has no metadata.uid"
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
    job.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-01T00:00:00Z".parse().unwrap(),
    ));
    assert_eq!(lifecycle(&job), Lifecycle::Deleting);
    assert_eq!(revision(&job), 3);
}

#[test]
fn pods_started_once_one_is_ready_or_finished_not_while_all_are_pending() {
    let status = |json: serde_json::Value| -> JobStatus {
        serde_json::from_value(json).expect("a JobStatus")
    };
    let started = |json| <Job as RelayedKind>::pods_started(&status(json));
    assert!(
        !started(serde_json::json!({"active": 3, "ready": 0})),
        "pending, maybe unbound"
    );
    assert!(started(serde_json::json!({"active": 3, "ready": 1})));
    assert!(started(serde_json::json!({"succeeded": 1})));
    assert!(started(serde_json::json!({"failed": 2})));
}
