//! A worker's JobStatus bytes to the status patch body: each step, and the
//! whole path for a status the manager Job shows already or does not.

use divan::{Bencher, black_box};
use jobrelay_manager::kinds::carried::Counting;
use jobrelay_manager::kinds::job_status::{copied, differs, patch_body, reconciled};
use k8s_openapi::api::batch::v1::JobStatus;
use serde_json::json;

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
    bencher.bench_local(|| {
        reconciled(
            black_box(Some(&current)),
            black_box(&worker),
            false,
            Counting::default(),
        )
    });
}

#[divan::bench]
fn status_differs(bencher: Bencher) {
    let current = manager_status_running();
    let worker = copied(&worker_status_bytes()).expect("valid status");
    let desired = reconciled(Some(&current), &worker, false, Counting::default());
    bencher.bench_local(|| differs(black_box(Some(&current)), black_box(&desired)));
}

#[divan::bench]
fn status_patch_body(bencher: Bencher) {
    let worker = copied(&worker_status_bytes()).expect("valid status");
    let desired = reconciled(
        Some(&manager_status_running()),
        &worker,
        false,
        Counting::default(),
    );
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
    let desired = reconciled(current, &worker, false, Counting::default());
    if !differs(current, &desired) {
        return None;
    }
    Some(serde_json::to_vec(&patch_body(&desired)).expect("JSON serialises"))
}
