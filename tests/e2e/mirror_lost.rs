//! A mirror lost behind jobrelay's back, and a worker that refuses a Job, on
//! real clusters: the manager Job is the source of truth, so a lost mirror
//! leaks no Pod and runs again (up to `mirrorLostLimit`), a refusal that can
//! clear is retried until it does, and a permanent one fails the Job. Every
//! scenario ends with the leak audit at zero.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use jobrelay_e2e::scenario::{Scenario, WAIT, condition, has_condition};
use jobrelay_proto::wire::{
    CLUSTER_KEY, DISPATCH_WAITING_ANNOTATION, MIRRORS_LOST_ANNOTATION, ORIGIN_LABEL,
    ORIGIN_UID_LABEL,
};
use jobrelay_testbed::cluster::ClusterInfo;
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod, ResourceQuota};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};

/// The agents' orphan grace in tests is 3s; a Pod of a lost mirror must be
/// gone well within the product's default bound of 30s.
const ORPHAN_BOUND: Duration = Duration::from_secs(30);
/// Long enough to delete a mirror while it runs, short enough to finish.
const RUN_FOR: &str = "15s";

/// The live (not deleting) mirror Job `name` on `worker` whose UID is not
/// `not`, once one of its Pods runs; returns its UID.
async fn running_mirror(
    s: &Scenario,
    worker: &ClusterInfo,
    name: &str,
    not: Option<&str>,
) -> String {
    let jobs = s.worker_api::<Job>(&worker.name).await;
    let pods = s.worker_api::<Pod>(&worker.name).await;
    wait::until(
        format!("a new mirror of {name} running on {}", worker.name),
        WAIT,
        || async {
            let job = match jobs.get_opt(name).await {
                Ok(Some(job)) => job,
                Ok(None) => return Seen::Waiting("no mirror Job".into()),
                Err(e) => return Seen::Waiting(e.to_string()),
            };
            let uid = job.uid().unwrap_or_default();
            if job.metadata.deletion_timestamp.is_some() || Some(uid.as_str()) == not {
                return Seen::Waiting(format!("only the old mirror {uid}"));
            }
            let running = owned_pods(&pods, &job.labels()[ORIGIN_UID_LABEL])
                .await
                .into_iter()
                .filter(|(owner, phase)| owner.as_deref() == Some(&uid) && phase == "Running")
                .count();
            if running > 0 {
                Seen::Ready(uid)
            } else {
                Seen::Waiting(format!("mirror {uid} has no running Pod yet"))
            }
        },
    )
    .await
}

/// (owner Job UID, phase) of every Pod of origin UID `uid`; phase ends in
/// `+Terminating` for a Pod being deleted.
async fn owned_pods(pods: &Api<Pod>, uid: &str) -> Vec<(Option<String>, String)> {
    let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
    let Ok(list) = pods.list(&selector).await else {
        return Vec::new();
    };
    list.items
        .iter()
        .map(|pod| {
            let owner = pod
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone());
            let mut phase = pod
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            if pod.metadata.deletion_timestamp.is_some() {
                phase.push_str("+Terminating");
            }
            (owner, phase)
        })
        .collect()
}

/// Waits until no Pod of origin UID `uid` on `worker` belongs to the lost
/// mirror `lost` (or to no Job at all).
async fn wait_remains_gone(s: &Scenario, worker: &ClusterInfo, uid: &str, lost: &str) {
    let pods = s.worker_api::<Pod>(&worker.name).await;
    wait::until(
        format!("no Pod of the lost mirror {lost} left on {}", worker.name),
        ORPHAN_BOUND,
        || async {
            let left: Vec<_> = owned_pods(&pods, uid)
                .await
                .into_iter()
                .filter(|(owner, _)| owner.as_deref().is_none_or(|o| o == lost))
                .collect();
            if left.is_empty() {
                Seen::Ready(())
            } else {
                Seen::Waiting(format!("{left:?}"))
            }
        },
    )
    .await
}

/// Waits until the manager Job is `Complete`, checking on every look that
/// at most one generation of its mirror has live Pods on `worker`.
async fn wait_complete_one_generation_at_a_time(
    s: &Scenario,
    worker: &ClusterInfo,
    name: &str,
    uid: &str,
) -> Job {
    let pods = s.worker_api::<Pod>(&worker.name).await;
    let overlaps = Mutex::new(Vec::new());
    let job = wait::until(format!("manager Job {name} Complete"), WAIT * 2, || async {
        let owners: BTreeSet<Option<String>> = owned_pods(&pods, uid)
            .await
            .into_iter()
            .filter(|(_, phase)| phase == "Running")
            .map(|(owner, _)| owner)
            .collect();
        if owners.len() > 1 {
            overlaps.lock().unwrap().push(owners);
        }
        match s.jobs.get(name).await {
            Ok(job) if has_condition(&job, "Complete") => Seen::Ready(job),
            Ok(job) => Seen::Waiting(format!("status {:?}", job.status)),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    let overlaps = overlaps.into_inner().unwrap();
    assert!(
        overlaps.is_empty(),
        "two generations ran at once: {overlaps:?}"
    );
    job
}

async fn delete_mirror(s: &Scenario, worker: &ClusterInfo, name: &str, policy: PropagationPolicy) {
    let params = DeleteParams {
        propagation_policy: Some(policy),
        ..Default::default()
    };
    s.worker_api::<Job>(&worker.name)
        .await
        .delete(name, &params)
        .await
        .unwrap_or_else(|e| panic!("deleting the mirror {name} on {}: {e}", worker.name));
}

/// Waits until the manager Job's annotation `key` satisfies `want`.
async fn wait_annotation(
    s: &Scenario,
    name: &str,
    key: &str,
    want: impl Fn(Option<&str>) -> bool,
) -> Option<String> {
    wait::until(
        format!("annotation {key} of Job {name}"),
        WAIT * 2,
        || async {
            match s.jobs.get(name).await {
                Ok(job) => {
                    let value = job.annotations().get(key).cloned();
                    if want(value.as_deref()) {
                        Seen::Ready(value)
                    } else {
                        Seen::Waiting(format!("{key}={value:?}"))
                    }
                }
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await
}

fn failure(job: &Job) -> (String, String) {
    let failed = condition(job, "Failed").unwrap_or_else(|| {
        panic!(
            "Job {} has no Failed condition: {:?}",
            job.name_any(),
            job.status
        )
    });
    (
        failed.reason.clone().unwrap_or_default(),
        failed.message.clone().unwrap_or_default(),
    )
}

#[path = "mirror_lost/lost.rs"]
mod lost;
#[path = "mirror_lost/refused.rs"]
mod refused;
