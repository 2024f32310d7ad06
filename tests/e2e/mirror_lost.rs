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

async fn lose_and_rerun(s: &Scenario, name: &str, policy: PropagationPolicy) {
    let uid = s.create(s.job(name).run_for(RUN_FOR)).await;
    let worker = s.assigned_worker(name).await;
    let first = running_mirror(s, worker, name, None).await;
    delete_mirror(s, worker, name, policy).await;

    wait_remains_gone(s, worker, &uid, &first).await;
    let second = running_mirror(s, worker, name, Some(&first)).await;
    assert_ne!(first, second);
    let done = wait_complete_one_generation_at_a_time(s, worker, name, &uid).await;

    assert_eq!(
        done.annotations()
            .get(MIRRORS_LOST_ANNOTATION)
            .map(String::as_str),
        Some("1")
    );
    let status = done.status.expect("status");
    assert_eq!(
        status.succeeded,
        Some(1),
        "{name}: the re-run's success is shown"
    );
    assert_eq!(status.active.unwrap_or(0), 0);
    let note = s.wait_event(name, "RemoteJobLost").await;
    assert!(
        note.contains(&worker.name) && note.contains("attempt 2 of 3"),
        "{note}"
    );
}

#[tokio::test]
async fn a_mirror_deleted_behind_jobrelays_back_leaks_no_pod_and_runs_again() {
    let s = Scenario::relayed("lost").await;
    futures::future::join3(
        lose_and_rerun(&s, "orphaned", PropagationPolicy::Orphan),
        lose_and_rerun(&s, "background", PropagationPolicy::Background),
        lose_and_rerun(&s, "foreground", PropagationPolicy::Foreground),
    )
    .await;
    let lost = s
        .relay
        .metrics()
        .await
        .expect("metrics")
        .lines()
        .filter(|l| l.starts_with("jobrelay_mirrors_lost_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>();
    assert!(
        lost >= 3.0,
        "jobrelay_mirrors_lost_total counts the losses: {lost}"
    );
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_job_whose_mirror_is_lost_mirror_lost_limit_times_fails() {
    let s = Scenario::relayed("lost-limit").await;
    let uid = s.create(s.job("unlucky").run_for(RUN_FOR)).await;
    let worker = s.assigned_worker("unlucky").await;
    let mut last = None;
    for _ in 0..3 {
        let mirror = running_mirror(&s, worker, "unlucky", last.as_deref()).await;
        delete_mirror(&s, worker, "unlucky", PropagationPolicy::Background).await;
        wait_remains_gone(&s, worker, &uid, &mirror).await;
        last = Some(mirror);
    }
    let failed = s.wait_condition("unlucky", "Failed").await;
    let (reason, message) = failure(&failed);
    assert_eq!(reason, "RemoteJobLost");
    assert!(
        message.contains("3 lost of 3 allowed") && message.contains(&worker.name),
        "{message}"
    );
    assert!(
        has_condition(&failed, "FailureTarget"),
        "FailureTarget before Failed"
    );
    assert_eq!(
        failed.status.as_ref().and_then(|s| s.active).unwrap_or(0),
        0
    );
    assert_eq!(
        s.mirrors().await.expect("mirrors").get(&uid),
        None,
        "not run a fourth time"
    );
    s.wait_released("unlucky").await;
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_worker_namespace_deleted_under_running_mirrors_runs_them_again_once_it_is_back() {
    let s = Scenario::relayed("ns-gone").await;
    let worker = s.worker("worker-1");
    let names = ["first", "second"];
    let mut uids = Vec::new();
    // The batch/v1 default backoffLimit: the namespace controller deleting a
    // Pod is one failure the worker's Job controller retries, not the end of
    // the Job (with a limit of 0 the worker would truthfully report it
    // Failed, and the manager Job would fail with it).
    for name in names {
        let job = s.job(name).label(CLUSTER_KEY, "worker-1").run_for(RUN_FOR);
        uids.push(s.create(job.backoff_limit(6)).await);
    }
    for name in names {
        running_mirror(&s, worker, name, None).await;
    }
    let namespaces: Api<Namespace> = Api::all(kit::client(worker).await);
    namespaces
        .delete(&s.ns, &DeleteParams::background())
        .await
        .expect("delete the worker namespace");
    for name in names {
        let waiting = wait_annotation(&s, name, DISPATCH_WAITING_ANNOTATION, |v| v.is_some()).await;
        let waiting = waiting.unwrap_or_default();
        assert!(
            waiting.contains("NAMESPACE_TERMINATING") || waiting.contains("NAMESPACE_MISSING"),
            "{waiting}"
        );
    }
    wait::until("the worker namespace gone", WAIT, || async {
        match namespaces.get_opt(&s.ns).await {
            Ok(None) => Seen::Ready(()),
            Ok(Some(ns)) => Seen::Waiting(format!("{:?}", ns.status)),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    kit::create_namespace(&kit::client(worker).await, &s.ns).await;
    for (name, uid) in names.iter().zip(&uids) {
        let done = wait_complete_one_generation_at_a_time(&s, worker, name, uid).await;
        assert_eq!(
            done.annotations()
                .get(MIRRORS_LOST_ANNOTATION)
                .map(String::as_str),
            Some("1")
        );
        wait_annotation(&s, name, DISPATCH_WAITING_ANNOTATION, |v| v.is_none()).await;
        s.wait_event(name, "DispatchWaiting").await;
    }
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_namespace_missing_on_the_worker_is_waited_for_and_dispatched_once_created() {
    let (clusters, relay) = kit::relay().await;
    let manager = kit::client(clusters.manager()).await;
    let ns = kit::namespace(&manager, "ns-late").await;
    let s = Scenario {
        clusters,
        relay,
        jobs: Api::namespaced(manager, &ns),
        ns,
    };
    let uid = s
        .create(s.job("early").label(CLUSTER_KEY, "worker-1").run_for("2s"))
        .await;
    let waiting = wait_annotation(&s, "early", DISPATCH_WAITING_ANNOTATION, |v| v.is_some())
        .await
        .unwrap_or_default();
    assert!(
        waiting.contains("NAMESPACE_MISSING") && waiting.contains("worker-1"),
        "{waiting}"
    );
    let note = s.wait_event("early", "DispatchWaiting").await;
    assert!(note.contains("tries again in"), "{note}");
    // About a minute of refusals: the agent's backoff has reached its cap
    // (10s in tests) and keeps trying without telling the manager again.
    wait::until("the agent to have retried six times", WAIT * 2, || async {
        let retries = relay
            .agent_log("worker-1")
            .lines()
            .filter(|l| l.contains("apply refused again") && l.contains(&uid))
            .count();
        if retries >= 6 {
            Seen::Ready(())
        } else {
            Seen::Waiting(format!("{retries} retries"))
        }
    })
    .await;
    let dispatch_waiting = s
        .events("early")
        .await
        .into_iter()
        .filter(|(r, _)| r == "DispatchWaiting")
        .count();
    assert_eq!(dispatch_waiting, 1, "one Event per reason, not per retry");

    kit::create_namespace(&kit::client(s.worker("worker-1")).await, &s.ns).await;
    s.wait_condition("early", "Complete").await;
    wait_annotation(&s, "early", DISPATCH_WAITING_ANNOTATION, |v| v.is_none()).await;
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_quota_that_refuses_the_job_is_waited_out_until_it_is_raised() {
    let s = Scenario::relayed("quota").await;
    let worker = s.worker("worker-1");
    let quotas = s.worker_api::<ResourceQuota>(&worker.name).await;
    let quota: ResourceQuota = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "jobs"},
        "spec": {"hard": {"count/jobs.batch": "0"}},
    }))
    .expect("quota");
    quotas
        .create(&PostParams::default(), &quota)
        .await
        .expect("create quota");
    let enforced = |want: &'static str| {
        let quotas = quotas.clone();
        wait::until(
            format!("the quota controller to enforce {want} Jobs"),
            WAIT,
            move || {
                let quotas = quotas.clone();
                async move {
                    match quotas.get("jobs").await {
                        Ok(q) => {
                            let hard = q
                                .status
                                .as_ref()
                                .and_then(|s| s.hard.as_ref())
                                .and_then(|h| h.get("count/jobs.batch"))
                                .map(|v| v.0.clone());
                            if hard.as_deref() == Some(want) {
                                Seen::Ready(())
                            } else {
                                Seen::Waiting(format!("status.hard {hard:?}"))
                            }
                        }
                        Err(e) => Seen::Waiting(e.to_string()),
                    }
                }
            },
        )
    };
    enforced("0").await;

    s.create(s.job("capped").label(CLUSTER_KEY, "worker-1").run_for("2s"))
        .await;
    let waiting = wait_annotation(&s, "capped", DISPATCH_WAITING_ANNOTATION, |v| v.is_some())
        .await
        .unwrap_or_default();
    assert!(
        waiting.contains("QUOTA_EXCEEDED") && waiting.contains("exceeded quota"),
        "{waiting}"
    );

    let raise = serde_json::json!({"spec": {"hard": {"count/jobs.batch": "5"}}});
    quotas
        .patch("jobs", &PatchParams::default(), &Patch::Merge(&raise))
        .await
        .expect("raise quota");
    enforced("5").await;
    s.wait_condition("capped", "Complete").await;
    wait_annotation(&s, "capped", DISPATCH_WAITING_ANNOTATION, |v| v.is_none()).await;
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_foreign_job_of_the_same_name_fails_the_job_and_is_left_untouched() {
    let s = Scenario::relayed("foreign").await;
    let foreign_jobs = s.worker_api::<Job>("worker-1").await;
    let foreign = foreign_jobs
        .create(
            &PostParams::default(),
            &TestJob::new(&s.ns, "same").run_for("1h").build(),
        )
        .await
        .expect("create foreign Job");

    s.create(s.job("same").label(CLUSTER_KEY, "worker-1")).await;
    let failed = s.wait_condition("same", "Failed").await;
    let (reason, message) = failure(&failed);
    assert_eq!(reason, "RemoteRejected");
    assert!(
        message.contains("CONFLICT") && message.contains("left untouched"),
        "{message}"
    );
    assert!(
        failed
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .is_some()
    );
    let note = s.wait_event("same", "RemoteRejected").await;
    assert!(note.contains("the Job fails"), "{note}");
    s.wait_released("same").await;

    s.finish(WAIT).await;
    let after = foreign_jobs
        .get("same")
        .await
        .expect("the foreign Job survives");
    assert_eq!(after.uid(), foreign.uid());
    assert!(
        after.labels().get(ORIGIN_LABEL).is_none(),
        "no jobrelay label was added"
    );
    foreign_jobs
        .delete("same", &DeleteParams::background())
        .await
        .expect("delete the foreign Job");
}
