//! The manager Job to the bytes of an ApplyMirror: stripping it to its
//! mirror, serialising the mirror, and both.

use divan::{Bencher, black_box};
use jobrelay_manager::kinds::RelayedKind;
use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};

pub(crate) const ORIGIN: &str = "hub-eu-west-1";

fn container(name: &str, image: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/run", "--config", "/etc/trainer/config.yaml"],
        "args": ["--epochs", "20", "--batch-size", "256", "--checkpoint-dir", "/checkpoints"],
        "env": [
            {"name": "DATASET", "value": "s3://datasets/imagenet-2026-11"},
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "WORKERS", "value": "8"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "trainer-secrets", "key": "token"}}},
        ],
        "resources": {
            "requests": {"cpu": cpu, "memory": memory},
            "limits": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": "1"},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/trainer", "readOnly": true},
            {"name": "checkpoints", "mountPath": "/checkpoints"},
        ],
    })
}

/// What a user applies with kubectl: the last-applied-configuration.
fn manifest() -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train-resnet-nightly-29334720",
            "namespace": "ml-vision",
            "labels": {
                "app.kubernetes.io/name": "trainer",
                "app.kubernetes.io/part-of": "vision-pipeline",
                "team": "vision",
                "cost-center": "cc-4711",
            },
        },
        "spec": {
            "managedBy": "jobrelay.dev/manager",
            "parallelism": 4,
            "completions": 10,
            "completionMode": "Indexed",
            "backoffLimitPerIndex": 2,
            "maxFailedIndexes": 3,
            "ttlSecondsAfterFinished": 86400,
            "activeDeadlineSeconds": 36000,
            "template": {
                "metadata": {
                    "labels": {"app.kubernetes.io/name": "trainer", "team": "vision"},
                    "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": "trainer",
                    "priorityClassName": "batch-high",
                    "nodeSelector": {"accelerator": "nvidia-h100", "pool": "training"},
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                    ],
                    "initContainers": [container("fetch-dataset", "registry.example.com/tools/fetch:2.3.1", "500m", "1Gi")],
                    "containers": [
                        container("trainer", "registry.example.com/vision/trainer:2026.11.3", "8", "64Gi"),
                        container("metrics-exporter", "registry.example.com/tools/exporter:1.9.0", "100m", "128Mi"),
                        container("log-shipper", "registry.example.com/tools/shipper:0.14.2", "200m", "256Mi"),
                    ],
                    "volumes": [
                        {"name": "config", "configMap": {"name": "trainer-config"}},
                        {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "checkpoints"}},
                    ],
                },
            },
        },
    })
}

/// The manager Job as the API server returns it.
fn manager_job() -> Job {
    let manifest = manifest();
    let last_applied = manifest.to_string();
    let mut job = manifest;
    let uid = "6f1c2b9e-4a7d-4c3e-9b1a-2d5e8f7a0c31";
    let meta = &mut job["metadata"];
    meta["uid"] = json!(uid);
    meta["resourceVersion"] = json!("918273645");
    meta["generation"] = json!(3);
    meta["creationTimestamp"] = json!("2026-11-22T02:00:00Z");
    meta["annotations"] = json!({
        "kubectl.kubernetes.io/last-applied-configuration": last_applied,
        "jobrelay.dev/cluster": "worker-gpu-a",
        "batch.kubernetes.io/job-tracking": "",
        "owner": "vision-oncall@example.com",
    });
    meta["ownerReferences"] = json!([{
        "apiVersion": "batch/v1", "kind": "CronJob", "name": "train-resnet-nightly",
        "uid": "0b7d6a0e-9e55-4f0b-8f5d-5b2b8b8f1f00", "controller": true, "blockOwnerDeletion": true,
    }]);
    meta["finalizers"] = json!(["jobrelay.dev/remote-cleanup"]);
    meta["managedFields"] = json!([{
        "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "batch/v1",
        "time": "2026-11-22T02:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}},
    }]);
    let spec = &mut job["spec"];
    spec["suspend"] = json!(false);
    spec["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
    let template_labels = &mut spec["template"]["metadata"]["labels"];
    for key in ["controller-uid", "batch.kubernetes.io/controller-uid"] {
        template_labels[key] = json!(uid);
    }
    for key in ["job-name", "batch.kubernetes.io/job-name"] {
        template_labels[key] = json!("train-resnet-nightly-29334720");
    }
    job["status"] = json!({"active": 4, "ready": 4, "startTime": "2026-11-22T02:00:05Z"});
    serde_json::from_value(job).expect("the benchmark Job is a valid Job")
}

/// Stripping the manager Job down to its mirror.
#[divan::bench]
fn mirror_job_only(bencher: Bencher) {
    let job = manager_job();
    bencher.bench_local(|| black_box(&job).mirror(black_box(ORIGIN)));
}

/// Serialising the mirror into the ApplyMirror payload.
#[divan::bench]
fn mirror_to_vec_only(bencher: Bencher) {
    let mirror = manager_job().mirror(ORIGIN).expect("mirrorable");
    bencher.bench_local(|| serde_json::to_vec(black_box(&mirror)));
}

/// Both: the manager Job to the bytes of an ApplyMirror.
#[divan::bench]
fn apply_mirror_payload(bencher: Bencher) {
    let job = manager_job();
    bencher.bench_local(|| {
        let mirror = black_box(&job)
            .mirror(black_box(ORIGIN))
            .expect("mirrorable");
        serde_json::to_vec(&mirror).expect("a Job serialises")
    });
}
