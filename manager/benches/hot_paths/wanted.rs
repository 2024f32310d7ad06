//! Anti-entropy's scan: what the manager wants on every cluster, summarised
//! from every Job it holds, as the agents' Heartbeats are compared with. One
//! scan serves every session for a second.

use std::sync::Arc;
use std::time::Duration;

use divan::{Bencher, black_box};
use jobrelay_manager::session::wanted::{summarise, wanted_where};
use jobrelay_proto::wire::{CLUSTER_KEY, MANAGED_BY, REMOTE_CLEANUP_FINALIZER};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;

/// 10,000 running relayed Jobs placed over `clusters` clusters.
fn placed(clusters: usize) -> Vec<Arc<Job>> {
    (0..10_000)
        .map(|i| {
            let job = serde_json::json!({
                "metadata": {
                    "name": format!("job-{i}"), "namespace": "ml",
                    "uid": format!("{:08x}-0000-4000-8000-{i:012x}", (i as u32).wrapping_mul(2_654_435_761)),
                    "annotations": {CLUSTER_KEY: format!("worker-{}", i % clusters)},
                    "finalizers": [REMOTE_CLEANUP_FINALIZER],
                },
                "spec": {"managedBy": MANAGED_BY, "template": {}},
                "status": {"active": 1},
            });
            Arc::new(serde_json::from_value(job).expect("a Job"))
        })
        .collect()
}

/// One scan of 10,000 Jobs placed over 2 to 3,000 clusters; divide by
/// 10,000 for one Job.
#[divan::bench(sample_count = 20, args = [2, 1000, 3000])]
fn wanted_scan(bencher: Bencher, clusters: usize) {
    let jobs = placed(clusters);
    let retention = Duration::from_secs(600);
    bencher
        .counter(divan::counter::ItemsCount::new(jobs.len()))
        .bench_local(|| {
            let now = Timestamp::now();
            black_box(summarise(wanted_where(&jobs, now, retention)))
        });
}
