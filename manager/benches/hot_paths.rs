//! Micro-benchmarks of the manager's hot pure paths: turning a manager Job
//! into the ApplyMirror payload, turning a worker's JobStatus bytes into the
//! status patch body, taking an agent's inventory on reconnect, and placing
//! a wave of new Jobs over many clusters.
//!
//! Run with `cargo bench -p jobrelay-manager --bench hot_paths`.

use divan::{Bencher, black_box};
use jobrelay_manager::fleet::Fleet;
use jobrelay_manager::kinds::RelayedKind;
use jobrelay_manager::kinds::job_status::{copied, differs, patch_body, reconciled};
use jobrelay_manager::kinds::key::Key;
use jobrelay_manager::outbox::Outbox;
use jobrelay_proto::v1::{DesiredMirror, InventoryEntry, MirrorPhase};
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};
use tokio::sync::mpsc;

fn main() {
    divan::main();
}

const ORIGIN: &str = "hub-eu-west-1";

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

/// A finished Indexed Job's status as the worker's Job controller writes it,
/// in the bytes the agent sends.
fn worker_status_bytes() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
             "message": "Reached expected number of succeeded pods",
             "lastProbeTime": "2026-11-22T10:05:00Z", "lastTransitionTime": "2026-11-22T10:05:00Z"},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached",
             "message": "Reached expected number of succeeded pods",
             "lastProbeTime": "2026-11-22T10:05:01Z", "lastTransitionTime": "2026-11-22T10:05:01Z"},
        ],
        "startTime": "2026-11-22T02:00:05Z",
        "completionTime": "2026-11-22T10:05:01Z",
        "active": 0,
        "ready": 0,
        "terminating": 0,
        "succeeded": 10,
        "failed": 2,
        "completedIndexes": "0-9",
        "failedIndexes": "3,7",
        "uncountedTerminatedPods": {
            "succeeded": [
                "1d6a3c2e-0a51-4d8e-9c57-7b8d0e4f2a10",
                "4b2e9f71-3c6d-4a8b-b1e2-5f9d8c7a6e21",
            ],
            "failed": ["9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c32"],
        },
    }))
    .expect("JSON serialises")
}

/// The manager Job's status before the copy: still running.
fn manager_status_running() -> JobStatus {
    serde_json::from_value(json!({
        "startTime": "2026-11-22T02:00:05Z",
        "active": 4, "ready": 4, "terminating": 0, "succeeded": 8, "failed": 2,
        "completedIndexes": "0-2,4-6,8-9",
        "failedIndexes": "3,7",
    }))
    .expect("valid JobStatus")
}

/// The manager Job's status after an earlier copy of the same worker status.
fn manager_status_copied() -> JobStatus {
    serde_json::from_slice(&worker_status_bytes()).expect("valid JobStatus")
}

/// The agent's bytes to the copied fields (done when a MirrorStatus arrives).
#[divan::bench]
fn status_copied(bencher: Bencher) {
    let bytes = worker_status_bytes();
    bencher.bench_local(|| copied(black_box(&bytes)));
}

#[divan::bench]
fn status_reconciled(bencher: Bencher) {
    let current = manager_status_running();
    let worker = copied(&worker_status_bytes()).expect("valid status");
    bencher.bench_local(|| reconciled(black_box(Some(&current)), black_box(&worker), false));
}

#[divan::bench]
fn status_differs(bencher: Bencher) {
    let current = manager_status_running();
    let worker = copied(&worker_status_bytes()).expect("valid status");
    let desired = reconciled(Some(&current), &worker, false);
    bencher.bench_local(|| differs(black_box(Some(&current)), black_box(&desired)));
}

#[divan::bench]
fn status_patch_body(bencher: Bencher) {
    let worker = copied(&worker_status_bytes()).expect("valid status");
    let desired = reconciled(Some(&manager_status_running()), &worker, false);
    bencher.bench_local(|| patch_body(black_box(&desired)));
}

/// The whole path, for a status the manager Job does not show yet: bytes to
/// the serialised merge patch.
#[divan::bench]
fn status_path_changed(bencher: Bencher) {
    let bytes = worker_status_bytes();
    let current = manager_status_running();
    bencher.bench_local(|| status_path(black_box(&bytes), black_box(Some(&current))));
}

/// The whole path, for a status already shown: ends at `differs`.
#[divan::bench]
fn status_path_unchanged(bencher: Bencher) {
    let bytes = worker_status_bytes();
    let current = manager_status_copied();
    bencher.bench_local(|| status_path(black_box(&bytes), black_box(Some(&current))));
}

fn status_path(bytes: &[u8], current: Option<&JobStatus>) -> Option<Vec<u8>> {
    let worker = copied(bytes).expect("valid status");
    let desired = reconciled(current, &worker, false);
    if !differs(current, &desired) {
        return None;
    }
    Some(serde_json::to_vec(&patch_body(&desired)).expect("JSON serialises"))
}

/// Mirrors a cluster holds (and the manager wants) for the reconnect benches.
const MIRRORS: usize = 10_000;

/// A UID shaped like the API server's, its first part scattered.
fn uid(i: usize) -> String {
    let scattered = (i as u32).wrapping_mul(2_654_435_761);
    format!("{scattered:08x}-{:04x}-4000-8000-{i:012x}", i % 0xffff)
}

fn inventory() -> Vec<InventoryEntry> {
    (0..MIRRORS)
        .map(|i| InventoryEntry {
            origin_uid: uid(i),
            revision: 1 + (i % 3) as u64,
            phase: MirrorPhase::Running as i32,
            kind: None,
        })
        .collect()
}

fn desired() -> Vec<(DesiredMirror, Key)> {
    (0..MIRRORS)
        .map(|i| {
            let namespace = format!("team-{}", i % 50);
            let name = format!("job-{i}");
            let key = Key::of(&ObjectRef::<Job>::new(&name).within(&namespace));
            let mirror = DesiredMirror { origin_uid: uid(i) };
            (mirror, key)
        })
        .collect()
}

/// A fleet, its reconcile queue, and the agent's outbox, kept alive (and
/// dropped) outside the measured part.
struct Reconnect {
    fleet: Fleet,
    _triggers: mpsc::UnboundedReceiver<Key>,
    outbox: Outbox,
    _agent: mpsc::Receiver<jobrelay_proto::v1::ManagerMessage>,
    desired: Vec<(DesiredMirror, Key)>,
}

/// Room for every message a bench queues: a full outbox would drop them
/// and time something cheaper than a send.
const BENCH_OUTBOX: usize = 1 << 20;

fn reconnect_input(
    inventory: &[InventoryEntry],
    desired: &[(DesiredMirror, Key)],
    known: bool,
) -> Reconnect {
    let (triggers, mut triggered) = mpsc::unbounded_channel();
    let fleet = Fleet::new(triggers);
    if known {
        let (outbox, _agent) = Outbox::new(BENCH_OUTBOX);
        let session = fleet.connect(
            "worker-gpu-a",
            "0.1.0",
            inventory,
            desired.to_vec(),
            Vec::new(),
            outbox,
        );
        fleet.disconnect("worker-gpu-a", session);
        while triggered.try_recv().is_ok() {}
    }
    let (outbox, agent) = Outbox::new(BENCH_OUTBOX);
    Reconnect {
        fleet,
        _triggers: triggered,
        outbox,
        _agent: agent,
        desired: desired.to_vec(),
    }
}

/// The first session of a cluster: 10,000 held, 10,000 desired.
#[divan::bench(sample_count = 30)]
fn fleet_connect_first(bencher: Bencher) {
    fleet_connect(bencher, false);
}

/// A reconnect: the fleet already knows the cluster's 10,000 mirrors.
#[divan::bench(sample_count = 30)]
fn fleet_connect_again(bencher: Bencher) {
    fleet_connect(bencher, true);
}

fn fleet_connect(bencher: Bencher, known: bool) {
    let inventory = inventory();
    let desired = desired();
    bencher
        .with_inputs(|| reconnect_input(&inventory, &desired, known))
        .bench_local_refs(|input| {
            input.fleet.connect(
                "worker-gpu-a",
                "0.1.0",
                black_box(&inventory),
                std::mem::take(&mut input.desired),
                Vec::new(),
                input.outbox.clone(),
            )
        });
}

const CLUSTERS: usize = 100;

/// A fleet with `CLUSTERS` connected clusters and nothing placed yet; the
/// agents' ends are kept so no session counts as ended.
struct Placing {
    fleet: Fleet,
    _triggers: mpsc::UnboundedReceiver<Key>,
    _agents: Vec<mpsc::Receiver<jobrelay_proto::v1::ManagerMessage>>,
}

fn placing_input() -> Placing {
    let (triggers, triggered) = mpsc::unbounded_channel();
    let fleet = Fleet::new(triggers);
    let agents = (0..CLUSTERS)
        .map(|c| {
            let (outbox, agent) = Outbox::new(BENCH_OUTBOX);
            let name = format!("worker-{c:03}");
            fleet.connect(&name, "0.1.0", &[], Vec::new(), Vec::new(), outbox);
            agent
        })
        .collect();
    Placing {
        fleet,
        _triggers: triggered,
        _agents: agents,
    }
}

/// A wave of 10,000 new Jobs placed over 100 connected clusters, one
/// `Fleet::place` each; divide the time by 10,000 for one placement.
#[divan::bench(sample_count = 10)]
fn fleet_place_wave(bencher: Bencher) {
    let jobs: Vec<(String, Key)> = desired()
        .into_iter()
        .map(|(mirror, key)| (mirror.origin_uid, key))
        .collect();
    bencher
        .counter(divan::counter::ItemsCount::new(MIRRORS))
        .with_inputs(placing_input)
        .bench_local_refs(|input| {
            for (uid, key) in &jobs {
                black_box(input.fleet.place(uid, key, None, |_| true));
            }
        });
}
