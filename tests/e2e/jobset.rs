//! JobSets relayed end to end: on the manager cluster the JobSet CRD and
//! Kueue with its JobSet integration, the real JobSet controller (v0.11.1)
//! on worker-1 only, and jobrelay's manager and two agents as their real
//! binaries. The agent of worker-2, whose cluster serves no JobSets, does
//! not name the kind, so every JobSet goes to worker-1. Every scenario ends
//! with the leak check, JobSets included.

use std::time::Duration;

use jobrelay_e2e::scenario::live_worker_pods;
use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::wire::{CLUSTER_KEY, MANAGED_BY, ORIGIN_UID_LABEL, REMOTE_CLEANUP_FINALIZER};
use jobrelay_testbed::controllers::jobset::{JOBSET_NAME_LABEL, JobSetController};
use jobrelay_testbed::controllers::kueue::{Integrations, Kueue};
use jobrelay_testbed::kit::{self, Clusters};
use jobrelay_testbed::objects::fixtures::{RUN_FOR, pod_spec};
use jobrelay_testbed::objects::kueue_objects;
use jobrelay_testbed::objects::leaks::{assert_no_leaks, leaks};
use jobrelay_testbed::relay::Relay;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use tokio::sync::OnceCell;

/// The worker that runs the JobSet controller.
const JOBSET_WORKER: &str = "worker-1";

/// The AdmissionCheck answered by jobrelay.
const CHECK: &str = "jobrelay";
/// Label Kueue reads a JobSet's LocalQueue from.
const QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";

#[path = "jobset/flavors.rs"]
mod flavors;
#[path = "jobset/own_labels.rs"]
mod own_labels;

static SETUP: OnceCell<(JobSetController, Kueue, &'static Relay)> = OnceCell::const_new();

/// The clusters with JobSets served where this file says, then jobrelay
/// (which reads what each cluster serves when it starts).
async fn relayed(prefix: &str) -> (Scenario, Api<JobSet>) {
    let clusters: &'static Clusters = kit::clusters(2);
    let (_, _, relay) = SETUP
        .get_or_init(|| async {
            // Kueue's JobSet integration installs the JobSet CRD first.
            let integrations = Integrations { jobset: true };
            let state_dir = &clusters.set().state_dir;
            let kueue = Kueue::start_with(
                clusters.manager(),
                state_dir,
                &Default::default(),
                &integrations,
            )
            .await
            .unwrap_or_else(|e| panic!("starting Kueue on the manager: {e:#}"));
            let worker = clusters
                .workers()
                .iter()
                .find(|w| w.name == JOBSET_WORKER)
                .expect("worker-1");
            let controller = JobSetController::start(worker, &clusters.set().state_dir)
                .await
                .unwrap_or_else(|e| panic!("starting JobSet on {JOBSET_WORKER}: {e:#}"));
            let (_, relay) = kit::relay_with(2, Default::default()).await;
            let manager = kit::client(clusters.manager()).await;
            kueue_objects::admission_check(&manager, CHECK, None)
                .await
                .unwrap_or_else(|e| panic!("AdmissionCheck: {e:#}"));
            (controller, kueue, relay)
        })
        .await;
    let s = Scenario::new(clusters, relay, prefix).await;
    let jobsets = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    (s, jobsets)
}

/// A JobSet for jobrelay: a one-Pod "leader" and a three-Pod "workers"
/// replicated Job, whose Pods kwok runs for `run_for`.
fn leader_and_workers(name: &str, run_for: &str) -> JobSet {
    let mut pod = serde_json::to_value(pod_spec()).expect("pod spec");
    pod["containers"][0]["resources"] = json!({"requests": {"cpu": "500m"}});
    let replicated = |job: &str, pods: u32| {
        json!({"name": job, "replicas": 1, "template": {"spec": {
            "parallelism": pods, "completions": pods, "backoffLimit": 0,
            "template": {"metadata": {"annotations": {RUN_FOR: run_for}}, "spec": pod},
        }}})
    };
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "managedBy": MANAGED_BY,
            "replicatedJobs": [replicated("leader", 1), replicated("workers", 3)],
        },
    }))
    .expect("JobSet")
}

/// Creates `jobset` on the manager; its UID.
async fn create(jobsets: &Api<JobSet>, jobset: &JobSet) -> String {
    let created = jobsets.create(&PostParams::default(), jobset).await;
    created.expect("create JobSet").uid().expect("uid")
}

/// The objects on worker-1 of the JobSet `name`'s mirror.
async fn on_worker<K>(s: &Scenario, name: &str) -> Vec<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = s.worker_api(JOBSET_WORKER).await;
    let selector = format!("{JOBSET_NAME_LABEL}={name}");
    api.list(&ListParams::default().labels(&selector))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// Waits until the manager JobSet `name` is `what` (`ready` says).
async fn wait_manager(
    jobsets: &Api<JobSet>,
    (name, what): (&str, &str),
    ready: impl Fn(&JobSet) -> bool,
) -> JobSet {
    wait::until(format!("manager JobSet {name} {what}"), WAIT, || async {
        match jobsets.get(name).await {
            Ok(set) if ready(&set) => Seen::Ready(set),
            Ok(set) => Seen::Waiting(format!(
                "finalizers {:?}, status {:?}",
                set.finalizers(),
                set.status
            )),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await
}

#[tokio::test]
async fn a_jobset_runs_where_jobsets_are_served_completes_and_leaves_nothing_behind() {
    let (s, jobsets) = relayed("jobset-complete").await;
    let uid = create(&jobsets, &leader_and_workers("trio", "3s")).await;

    let placed = wait_manager(&jobsets, ("trio", "placed"), |set| {
        set.annotations().contains_key(CLUSTER_KEY)
    })
    .await;
    assert_eq!(
        placed.annotations()[CLUSTER_KEY],
        JOBSET_WORKER,
        "only worker-1's agent mirrors JobSets"
    );
    // Every Pod of every replicated Job carries the origin.
    let pods = wait::until("4 Pods of the mirror on worker-1", WAIT, || async {
        let pods: Vec<Pod> = on_worker(&s, "trio").await;
        match pods.len() {
            4 => Seen::Ready(pods),
            n => Seen::Waiting(format!("{n} Pods")),
        }
    })
    .await;
    for pod in &pods {
        assert_eq!(
            pod.labels().get(ORIGIN_UID_LABEL),
            Some(&uid),
            "{}",
            pod.name_any()
        );
    }

    let done = wait_manager(&jobsets, ("trio", "Completed"), |set| {
        set.condition("Completed")
    })
    .await;
    let status = done.status.expect("status");
    assert_eq!(status.terminal_state.as_deref(), Some("Completed"));
    let succeeded: std::collections::BTreeMap<String, i64> = status.rest["replicatedJobsStatus"]
        .as_array()
        .expect("replicatedJobsStatus")
        .iter()
        .map(|r| {
            let name = r["name"].as_str().unwrap_or_default().to_string();
            (name, r["succeeded"].as_i64().unwrap_or(0))
        })
        .collect();
    assert_eq!(
        succeeded,
        [("leader".to_string(), 1), ("workers".to_string(), 1)].into(),
        "the worker's counts, per replicated Job"
    );

    // Retention is 0s: the mirror goes, and the finalizer only once it, its
    // Jobs and its Pods are gone.
    wait_manager(&jobsets, ("trio", "released"), |set| {
        !set.finalizers()
            .iter()
            .any(|f| f == REMOTE_CLEANUP_FINALIZER)
    })
    .await;
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
    finish(&s, &jobsets).await;
}

#[tokio::test]
async fn a_running_jobset_deleted_on_the_manager_is_gone_with_every_job_and_pod_before_its_finalizer()
 {
    let (s, jobsets) = relayed("jobset-delete").await;
    jobsets
        .create(&PostParams::default(), &leader_and_workers("long", "10m"))
        .await
        .expect("create JobSet");
    wait::until("the mirror's 4 Pods running on worker-1", WAIT, || async {
        let pods: Vec<Pod> = on_worker(&s, "long").await;
        let running = pods
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        match running {
            4 => Seen::Ready(()),
            n => Seen::Waiting(format!("{n} of {} Pods running", pods.len())),
        }
    })
    .await;

    jobsets
        .delete("long", &DeleteParams::background())
        .await
        .expect("delete JobSet");
    wait::until("manager JobSet long gone", WAIT, || async {
        match jobsets.get_opt("long").await {
            Ok(None) => Seen::Ready(()),
            Ok(Some(set)) => Seen::Waiting(format!("finalizers {:?}", set.finalizers())),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    // No wait: the finalizer went only once the agent saw the last of it go.
    let left = leaks(s.clusters.set(), &s.relay.origin, &s.ns)
        .await
        .expect("leak check");
    assert!(left.is_empty(), "left when the finalizer went: {left:?}");
    finish(&s, &jobsets).await;
}

#[tokio::test]
async fn a_child_job_orphaned_behind_jobrelays_back_leaves_no_pod_running() {
    let (s, jobsets) = relayed("jobset-orphan").await;
    jobsets
        .create(&PostParams::default(), &leader_and_workers("orphan", "10m"))
        .await
        .expect("create JobSet");
    let workers_job = wait::until("the workers Job of the mirror", WAIT, || async {
        let jobs: Vec<Job> = on_worker(&s, "orphan").await;
        let pods: Vec<Pod> = on_worker(&s, "orphan").await;
        match jobs.into_iter().find(|j| j.name_any().contains("workers")) {
            Some(job) if pods.len() == 4 => Seen::Ready(job),
            _ => Seen::Waiting(format!("{} Pods", pods.len())),
        }
    })
    .await;
    let jobs: Api<Job> = s.worker_api(JOBSET_WORKER).await;
    jobs.delete(&workers_job.name_any(), &DeleteParams::orphan())
        .await
        .expect("orphan the workers Job");

    // The orphaned Pods are the agent's to delete (after its orphan grace);
    // the JobSet controller starts the Job again.
    wait::until(
        "no Pod of the orphaned Job left, the JobSet's Pods running again",
        WAIT,
        || async {
            let pods: Vec<Pod> = on_worker(&s, "orphan").await;
            // An Orphan delete takes the Job's owner reference off its Pods.
            let orphans = pods
                .iter()
                .filter(|p| p.owner_references().is_empty())
                .count();
            let owned = pods.len() - orphans;
            match (orphans, owned) {
                (0, 4) => Seen::Ready(()),
                (o, n) => Seen::Waiting(format!("{o} orphaned Pods, {n} owned")),
            }
        },
    )
    .await;
    finish(&s, &jobsets).await;
}

#[tokio::test]
async fn a_jobset_mirror_deleted_behind_jobrelays_back_is_run_again_and_completes() {
    let (s, jobsets) = relayed("jobset-lost").await;
    jobsets
        .create(&PostParams::default(), &leader_and_workers("lost", "6s"))
        .await
        .expect("create JobSet");
    let mirrors: Api<JobSet> = s.worker_api(JOBSET_WORKER).await;
    let first = wait::until("the mirror's 4 Pods on worker-1", WAIT, || async {
        let pods: Vec<Pod> = on_worker(&s, "lost").await;
        match (pods.len(), mirrors.get_opt("lost").await) {
            (4, Ok(Some(mirror))) => Seen::Ready(mirror.uid().unwrap_or_default()),
            (n, _) => Seen::Waiting(format!("{n} Pods")),
        }
    })
    .await;
    mirrors
        .delete("lost", &DeleteParams::background())
        .await
        .expect("delete the mirror on the worker");

    let note = s.wait_event("lost", "RemoteJobLost").await;
    assert!(note.contains("attempt 2"), "{note}");
    wait::until("a new mirror on worker-1", WAIT, || async {
        match mirrors.get_opt("lost").await {
            Ok(Some(mirror)) if mirror.uid().as_ref() != Some(&first) => Seen::Ready(()),
            Ok(_) => Seen::Waiting("the lost one, or none".into()),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    wait_manager(&jobsets, ("lost", "Completed"), |set| {
        set.condition("Completed")
    })
    .await;
    finish(&s, &jobsets).await;
}

#[tokio::test]
async fn two_jobsets_queued_with_quota_for_one_never_run_at_once_and_both_complete() {
    let (s, jobsets) = relayed("jobset-kueue").await;
    let manager = s.jobs.clone().into_client();
    // 2 CPUs: one JobSet of four 500m Pods at a time.
    kueue_objects::queue(&manager, &s.ns, &s.ns, 2, CHECK)
        .await
        .expect("ClusterQueue");
    let mut uids = Vec::new();
    for name in ["first", "second"] {
        let mut jobset = leader_and_workers(name, "4s");
        jobset
            .labels_mut()
            .insert(QUEUE_NAME.into(), kueue_objects::LOCAL_QUEUE.into());
        let created = jobsets
            .create(&PostParams::default(), &jobset)
            .await
            .expect("create JobSet");
        uids.push(created.uid().expect("uid"));
    }
    let most = std::cell::Cell::new(0);
    wait::until(
        "both JobSets Completed, one at a time",
        Duration::from_secs(150),
        || async {
            let live = live_worker_pods(&s).await;
            let running = uids.iter().filter(|uid| live.contains_key(*uid)).count();
            assert!(
                running <= 1,
                "quota for one JobSet, Pods of {running} run: {live:?}"
            );
            most.set(most.get().max(running));
            let mut done = 0;
            for name in ["first", "second"] {
                if jobsets
                    .get(name)
                    .await
                    .is_ok_and(|set| set.condition("Completed"))
                {
                    done += 1;
                }
            }
            match done {
                2 => Seen::Ready(()),
                n => Seen::Waiting(format!("{n} Completed; live Pods {live:?}")),
            }
        },
    )
    .await;
    assert_eq!(most.get(), 1, "each ran");
    finish(&s, &jobsets).await;
}

/// Deletes every manager JobSet of the scenario, waits until all are gone,
/// and runs the leak check.
async fn finish(s: &Scenario, jobsets: &Api<JobSet>) {
    let names: Vec<String> = jobsets
        .list(&ListParams::default())
        .await
        .map(|l| l.items.iter().map(ResourceExt::name_any).collect())
        .unwrap_or_default();
    for name in &names {
        let _ = jobsets.delete(name, &DeleteParams::background()).await;
    }
    wait::until(
        "every manager JobSet of the scenario gone",
        Duration::from_secs(120),
        || async {
            match jobsets.list(&ListParams::default()).await {
                Ok(list) if list.items.is_empty() => Seen::Ready(()),
                Ok(list) => Seen::Waiting(format!("{} left", list.items.len())),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    s.finish(WAIT).await;
}
