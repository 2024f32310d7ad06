//! jobrelay behind a real Kueue (v0.19.2, built from its module and run as a
//! process on the manager cluster, webhooks by URL on loopback): Kueue queues
//! and admits the manager Jobs, jobrelay is the controller of their
//! AdmissionCheck, and the mirrors' `suspend` follows the manager Jobs'.
//! Every scenario ends with the leak audit at zero.
//!
//! The manager serves its admission webhook on loopback (see
//! `kueue/webhook.rs`); it is registered for one namespace only, so every
//! other scenario creates its Jobs as they are written.
//!
//! worker-3 runs a Kueue of its own and is opted in to worker-side Kueue
//! (see `kueue/worker_side.rs`), worker-4 loses its agent (see
//! `kueue/lost.rs`); the shared check keeps every other scenario on worker-1
//! and worker-2.

#[path = "kueue/flavors.rs"]
mod flavors;
#[path = "kueue/lost.rs"]
mod lost;
#[path = "kueue/not_ours.rs"]
mod not_ours;
#[path = "kueue/tas.rs"]
mod tas;
#[path = "kueue/webhook.rs"]
mod webhook;
#[path = "kueue/worker_side.rs"]
mod worker_side;

use std::collections::BTreeMap;
use std::time::Duration;

use jobrelay_e2e::kit::{self, Clusters};
use jobrelay_e2e::kueue::{Kueue, Settings};
use jobrelay_e2e::kueue_objects::LOCAL_QUEUE;
use jobrelay_e2e::kueue_objects::{self, live_worker_pods, worker_pods_of, workload_of};
use jobrelay_e2e::relay::{Options, Relay};
use jobrelay_e2e::scenario::{Scenario, WAIT, has_condition};
use jobrelay_e2e::wait::{self, Seen};
use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_manager::clusters::worker_cluster_set::{WorkerClusterSet, WorkerClusterSetSpec};
use jobrelay_manager::kueue::types::{AdmissionCheck, Workload};
use jobrelay_proto::wire::{AVOID_UNTIL_ANNOTATION, CLUSTER_KEY, WITHDRAWN_FROM_ANNOTATION};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use tokio::sync::OnceCell;

/// The AdmissionCheck every test's ClusterQueue lists.
const CHECK: &str = "jobrelay";
/// Label Kueue reads a Job's LocalQueue from.
const QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";
/// Label Kueue reads a Job's WorkloadPriorityClass from.
const PRIORITY_CLASS: &str = "kueue.x-k8s.io/priority-class";
/// `waitForPodsReady.timeout` of the Kueue these tests run.
const PODS_READY_TIMEOUT: &str = "15s";
/// `objectRetentionPolicies.workloads.afterFinished` of that Kueue.
const WORKLOADS_AFTER_FINISHED: &str = "5s";

/// The worker running its own Kueue, opted in with `spec.kueue`.
const KUEUE_WORKER: &str = "worker-3";
/// The check of Workloads that go to [`KUEUE_WORKER`].
const WORKER_CHECK: &str = "jobrelay-worker-kueue";
/// The LocalQueue on [`KUEUE_WORKER`] a manager LocalQueue
/// ([`LOCAL_QUEUE`]) maps to.
const WORKER_LOCAL_QUEUE: &str = "worker-queue";
/// `spec.kueue.admitWithin` of [`KUEUE_WORKER`].
const ADMIT_WITHIN: &str = "15s";

static SETUP: OnceCell<(&'static Clusters, &'static Relay)> = OnceCell::const_new();
static KUEUE: OnceCell<Kueue> = OnceCell::const_new();
static WORKER_KUEUE: OnceCell<Kueue> = OnceCell::const_new();

/// The clusters, Kueue on the manager (before jobrelay starts, so the
/// manager finds it) and on worker-3, jobrelay, and the shared objects.
async fn setup() -> (&'static Clusters, &'static Relay) {
    *SETUP
        .get_or_init(|| async {
            let clusters = kit::clusters(4);
            KUEUE
                .get_or_init(|| async {
                    let settings = Settings {
                        wait_for_pods_ready: Some(PODS_READY_TIMEOUT.into()),
                        workloads_after_finished: Some(WORKLOADS_AFTER_FINISHED.into()),
                    };
                    Kueue::start(clusters.manager(), &clusters.set().state_dir, &settings)
                        .await
                        .unwrap_or_else(|e| panic!("starting Kueue: {e:#}"))
                })
                .await;
            let worker = clusters
                .workers()
                .iter()
                .find(|w| w.name == KUEUE_WORKER)
                .expect("worker-3");
            WORKER_KUEUE
                .get_or_init(|| async {
                    Kueue::start(worker, &clusters.set().state_dir, &Settings::default())
                        .await
                        .unwrap_or_else(|e| panic!("starting Kueue on {KUEUE_WORKER}: {e:#}"))
                })
                .await;
            let options = Options {
                manager_args: webhook::manager_args(&clusters.set().state_dir),
                ..Options::default()
            };
            let (clusters, relay) = kit::relay_with(4, options).await;
            let client = kit::client(clusters.manager()).await;
            let prioritised = async {
                let (plain, own) = ("kueue-plain", "kueue-worker");
                apply_set(&client, plain, &["worker-1", "worker-2"]).await;
                apply_set(&client, own, &[KUEUE_WORKER]).await;
                let set = |name: &str| json!({"apiGroup": "jobrelay.dev", "kind": "WorkerClusterSet", "name": name});
                kueue_objects::admission_check(&client, CHECK, Some(set(plain))).await?;
                kueue_objects::admission_check(&client, WORKER_CHECK, Some(set(own))).await?;
                kueue_objects::flavor(&kit::client(worker).await).await?;
                let opt_in = json!({"spec": {"kueue": {
                    "localQueues": {(LOCAL_QUEUE): WORKER_LOCAL_QUEUE},
                    "admitWithin": ADMIT_WITHIN,
                }}});
                Api::<WorkerCluster>::all(client.clone())
                    .patch(KUEUE_WORKER, &PatchParams::default(), &Patch::Merge(opt_in))
                    .await?;
                for (name, value) in [("low", 100), ("high", 1000)] {
                    let class = json!({"metadata": {"name": name}, "value": value});
                    kueue_objects::apply(&client, "WorkloadPriorityClass", None, class).await?;
                }
                anyhow::Ok(())
            };
            prioritised.await.unwrap_or_else(|e| panic!("{e:#}"));
            (clusters, relay)
        })
        .await
}

/// Applies the WorkerClusterSet `name` of `clusters`.
async fn apply_set(client: &kube::Client, name: &str, clusters: &[&str]) {
    let sets: Api<WorkerClusterSet> = Api::all(client.clone());
    let set = WorkerClusterSet::new(
        name,
        WorkerClusterSetSpec {
            clusters: clusters.iter().map(|c| c.to_string()).collect(),
        },
    );
    sets.patch(
        name,
        &PatchParams::apply("jobrelay-e2e").force(),
        &Patch::Apply(&set),
    )
    .await
    .unwrap_or_else(|e| panic!("applying WorkerClusterSet {name}: {e}"));
}

/// A scenario with its own ClusterQueue (`cpu` CPUs of quota, lower
/// priorities preempted) and LocalQueue in its namespace.
async fn queued(prefix: &str, cpu: u32) -> Scenario {
    let (clusters, relay) = setup().await;
    let s = Scenario::new(clusters, relay, prefix).await;
    let client = kit::client(clusters.manager()).await;
    kueue_objects::queue(&client, &s.ns, &s.ns, cpu, CHECK)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    s
}

/// Waits until the scenario's ClusterQueue (named after its namespace)
/// holds no quota: no Workload reserving or admitted, every flavor's
/// reservation at zero.
async fn quota_back_to_zero(s: &Scenario) {
    let client = s.jobs.clone().into_client();
    let queues = kueue_objects::api(&client, "ClusterQueue", None);
    wait::until(
        format!("ClusterQueue {} usage back to zero", s.ns),
        WAIT,
        || async {
            let queue = match queues.get(&s.ns).await {
                Ok(q) => q,
                Err(e) => return Seen::Waiting(e.to_string()),
            };
            let status = &queue.data["status"];
            let count = |field: &str| status[field].as_i64().unwrap_or(0);
            let reserved: Vec<&str> = status["flavorsReservation"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|f| f["resources"].as_array().into_iter().flatten())
                .filter_map(|r| r["total"].as_str())
                .filter(|total| *total != "0")
                .collect();
            match (
                count("reservingWorkloads"),
                count("admittedWorkloads"),
                reserved.is_empty(),
            ) {
                (0, 0, true) => Seen::Ready(()),
                (reserving, admitted, _) => Seen::Waiting(format!(
                    "{reserving} reserving, {admitted} admitted, reserved {reserved:?}"
                )),
            }
        },
    )
    .await;
}

/// Waits until a live Pod of mirror `uid` (`what`) runs on a worker.
async fn running_on_a_worker(s: &Scenario, uid: &str, what: &str) {
    wait::until(format!("{what} running on a worker"), WAIT, || async {
        match live_worker_pods(s).await.get(uid) {
            Some(_) => Seen::Ready(()),
            None => Seen::Waiting("no Pod yet".into()),
        }
    })
    .await;
}

/// A Job queued in the scenario's LocalQueue, requesting one CPU.
fn queued_job(s: &Scenario, name: &str) -> jobrelay_e2e::fixtures::TestJob {
    s.job(name)
        .label(QUEUE_NAME, kueue_objects::LOCAL_QUEUE)
        .cpu("1")
}

#[tokio::test]
async fn the_admission_check_is_active_while_agents_are_connected() {
    let (clusters, _) = setup().await;
    let checks: Api<AdmissionCheck> = Api::all(kit::client(clusters.manager()).await);
    let check = wait::until("AdmissionCheck jobrelay Active", WAIT, || async {
        match checks.get(CHECK).await {
            Ok(c)
                if c.status
                    .iter()
                    .flat_map(|s| &s.conditions)
                    .any(|c| c.type_ == "Active" && c.status == "True") =>
            {
                Seen::Ready(c)
            }
            Ok(c) => Seen::Waiting(format!("{:?}", c.status)),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    let active = check
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Active")
        .unwrap();
    assert!(active.message.unwrap_or_default().contains("worker-1"));
}

#[tokio::test]
async fn quota_for_two_runs_five_jobs_never_more_than_two_at_once() {
    let s = queued("quota", 2).await;
    for i in 0..5 {
        s.create(queued_job(&s, &format!("q{i}")).run_for("3s"))
            .await;
    }
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    let first = workload_of(&s, "q0").await.name_any();
    wait::until(
        "jobrelay's check Ready on the first Workload",
        WAIT,
        || async {
            match workloads.get(&first).await.map(|w| w.check(CHECK).cloned()) {
                Ok(Some(check)) if check.state == "Ready" => Seen::Ready(()),
                other => Seen::Waiting(format!("{other:?}")),
            }
        },
    )
    .await;
    let most = std::cell::Cell::new(0);
    wait::until(
        "all 5 queued Jobs Complete, at most 2 running at once",
        Duration::from_secs(180),
        || async {
            let live = live_worker_pods(&s).await;
            let running: usize = live.values().sum();
            assert!(
                running <= 2,
                "quota is 2 CPUs, {running} Pods run on workers: {live:?}"
            );
            most.set(most.get().max(running));
            let jobs = s
                .jobs
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            let complete = jobs.iter().filter(|j| has_condition(j, "Complete")).count();
            match complete {
                5 => Seen::Ready(()),
                n => Seen::Waiting(format!("{n} of 5 Complete, {running} running")),
            }
        },
    )
    .await;
    assert!(most.get() >= 1, "the Jobs ran on the workers");
    // Each mirror was created suspended and resumed once Kueue admitted its Job.
    let job = s.jobs.get("q0").await.expect("q0");
    let conditions = job.status.and_then(|st| st.conditions).unwrap_or_default();
    let suspended = conditions.iter().find(|c| c.type_ == "Suspended");
    assert_eq!(
        suspended.map(|c| (c.status.as_str(), c.reason.as_deref())),
        Some(("False", Some("JobResumed"))),
        "the mirror started suspended: {conditions:?}"
    );
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_high_priority_job_preempts_and_the_low_ones_worker_pods_go_first() {
    let s = queued("preempt", 1).await;
    let low = s
        .create(
            queued_job(&s, "low")
                .label(PRIORITY_CLASS, "low")
                .run_for("12s")
                .terminate_after("3s"),
        )
        .await;
    wait::until("the low-priority Job running on a worker", WAIT, || async {
        match live_worker_pods(&s).await.get(&low) {
            Some(_) => Seen::Ready(()),
            None => Seen::Waiting("no Pod yet".into()),
        }
    })
    .await;
    let high = s
        .create(
            queued_job(&s, "high")
                .label(PRIORITY_CLASS, "high")
                .run_for("3s"),
        )
        .await;
    wait::until(
        "the high-priority Job running, after every Pod of the low one is gone",
        WAIT,
        || async {
            let high_pods = live_worker_pods(&s).await.get(&high).copied().unwrap_or(0);
            let low_pods = match worker_pods_of(&s, &low).await {
                Ok(pods) => pods,
                Err(e) => return Seen::Waiting(e),
            };
            if high_pods > 0 {
                assert_eq!(
                    low_pods, 0,
                    "the high Job's mirror runs while {low_pods} Pod(s) of the preempted one remain"
                );
                return Seen::Ready(());
            }
            Seen::Waiting(format!("low has {low_pods} Pods, high none running"))
        },
    )
    .await;
    let evicted = workload_of(&s, "low").await;
    assert!(
        evicted.has("Evicted") || evicted.has("Requeued") || !evicted.has("Admitted"),
        "the low Workload was evicted: {:?}",
        evicted.status
    );
    let mut outcomes = BTreeMap::new();
    outcomes.insert("high".to_string(), "Complete");
    outcomes.insert("low".to_string(), "Complete");
    s.wait_outcomes(&outcomes, Duration::from_secs(150)).await;
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_deactivated_workload_stops_its_pods_then_frees_its_quota() {
    let s = queued("deactivate", 1).await;
    let uid = s
        .create(queued_job(&s, "paused").run_for("1h").terminate_after("3s"))
        .await;
    running_on_a_worker(&s, &uid, "the Job").await;
    let worker = s.assigned_worker("paused").await.name.clone();
    let workload = workload_of(&s, "paused").await;
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    workloads
        .patch(
            &workload.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"active": false}})),
        )
        .await
        .expect("deactivate the Workload");
    wait::until(
        "quota released only once the worker's Pods are gone",
        WAIT,
        || async {
            // The Workload first: once it shows the quota released, no Pod
            // may be left (the Workload stays inactive, nothing new starts).
            let workload = match workloads.get(&workload.name_any()).await {
                Ok(w) => w,
                Err(e) => return Seen::Waiting(e.to_string()),
            };
            let pods = match worker_pods_of(&s, &uid).await {
                Ok(pods) => pods,
                Err(e) => return Seen::Waiting(e),
            };
            let reserved = workload.has("QuotaReserved");
            assert!(
                reserved || pods == 0,
                "quota released while {pods} Pod(s) remain on the worker"
            );
            let job = s.jobs.get("paused").await.expect("get");
            let suspended = job.spec.as_ref().and_then(|sp| sp.suspend) == Some(true);
            match (reserved, pods, suspended) {
                (false, 0, true) => Seen::Ready(()),
                _ => Seen::Waiting(format!(
                    "reserved {reserved}, {pods} worker Pods, suspended {suspended}"
                )),
            }
        },
    )
    .await;
    // Its mirror was withdrawn, not kept: a readmission places it afresh.
    let mirror: Api<Job> = s.worker_api(&worker).await;
    assert!(mirror.get_opt("paused").await.expect("get").is_none());
    let job = s.jobs.get("paused").await.expect("get");
    assert_eq!(job.annotations().get(CLUSTER_KEY), None, "unplaced");
    assert_eq!(
        job.annotations().get(WITHDRAWN_FROM_ANNOTATION),
        Some(&worker)
    );
    let note = s.wait_event("paused", "MirrorWithdrawn").await;
    assert!(note.contains(&worker), "{note}");
    s.finish(WAIT).await;
    quota_back_to_zero(&s).await;
}

#[tokio::test]
async fn a_job_whose_pods_never_get_ready_on_one_worker_is_placed_again_and_completes_on_another() {
    let s = queued("podsready", 1).await;
    // Only nodes carrying this label can run the Job, and at first no
    // worker's do: its Pod stays Pending wherever it is placed.
    let pool = ("jobrelay.dev/test-pool", s.ns.clone());
    s.create(
        queued_job(&s, "stuck")
            .node_selector(pool.0, &pool.1)
            .run_for("2s"),
    )
    .await;
    let first = s.assigned_worker("stuck").await.name.clone();
    let other = if first == "worker-1" {
        "worker-2"
    } else {
        "worker-1"
    };
    label_nodes(&s, other, pool.0, Some(&pool.1)).await;
    // Kueue evicts it for PodsReadyTimeout: the mirror is withdrawn and the
    // Job unplaced once its Pod is gone; readmitted, it is placed on the other worker — the first one
    // avoided — where its Pod gets ready and completes.
    let done = s.wait_condition("stuck", "Complete").await;
    let annotations = done.annotations();
    assert_eq!(
        annotations.get(CLUSTER_KEY).map(String::as_str),
        Some(other)
    );
    assert_eq!(
        annotations.get(WITHDRAWN_FROM_ANNOTATION),
        Some(&first),
        "{annotations:?}"
    );
    assert!(
        annotations.contains_key(AVOID_UNTIL_ANNOTATION),
        "{annotations:?}"
    );
    let withdrawn: Vec<String> = s
        .events("stuck")
        .await
        .into_iter()
        .filter(|(reason, _)| reason.starts_with("MirrorWithdraw"))
        .map(|(_, note)| note)
        .collect();
    assert!(
        withdrawn.iter().any(|n| n.contains("PodsReadyTimeout"))
            && withdrawn
                .iter()
                .any(|n| n.contains(&format!("avoiding cluster {first} until"))),
        "{withdrawn:?}"
    );
    s.finish(WAIT).await;
    quota_back_to_zero(&s).await;
    label_nodes(&s, other, pool.0, None).await;
}

/// Sets (or, with `None`, removes) a label on every node of `worker`.
async fn label_nodes(s: &Scenario, worker: &str, key: &str, value: Option<&str>) {
    let nodes: Api<Node> = Api::all(kit::client(s.worker(worker)).await);
    let listed = nodes
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing {worker}'s nodes: {e}"));
    for node in listed.items {
        let patch = json!({"metadata": {"labels": {key: value}}});
        nodes
            .patch(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
            .unwrap_or_else(|e| panic!("labelling node {} of {worker}: {e}", node.name_any()));
    }
}

#[tokio::test]
async fn a_job_without_a_queue_name_is_dispatched_directly_beside_kueue() {
    let (clusters, relay) = setup().await;
    let s = Scenario::new(clusters, relay, "unqueued").await;
    s.create(s.job("direct").run_for("2s")).await;
    s.wait_condition("direct", "Complete").await;
    s.finish(WAIT).await;
}

#[tokio::test]
async fn kueue_deleting_a_finished_workload_leaves_nothing_that_blocks_the_namespace() {
    let s = queued("retained", 1).await;
    s.create(queued_job(&s, "done").run_for("1s")).await;
    let workload = workload_of(&s, "done").await.name_any();
    s.wait_condition("done", "Complete").await;
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    wait::until(
        "Kueue deleting the finished Workload (afterFinished 5s)",
        WAIT,
        || async {
            match workloads.get_opt(&workload).await {
                Ok(None) => Seen::Ready(()),
                Ok(Some(w)) => {
                    Seen::Waiting(format!("still there, finalizers {:?}", w.finalizers()))
                }
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    s.wait_released("done").await;
    // The namespace goes with everything in it: no finalizer of jobrelay's holds it.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
        Api::all(s.jobs.clone().into_client());
    namespaces
        .delete(&s.ns, &Default::default())
        .await
        .expect("delete the namespace");
    wait::until(
        format!("namespace {} gone from the manager", s.ns),
        WAIT,
        || async {
            match namespaces.get_opt(&s.ns).await {
                Ok(None) => Seen::Ready(()),
                Ok(Some(ns)) => Seen::Waiting(format!("{:?}", ns.status)),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    jobrelay_e2e::leaks::assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
}

#[tokio::test]
async fn a_queued_job_a_worker_refuses_for_good_fails_and_its_workload_finishes() {
    let s = queued("refused", 1).await;
    // A Job of the same name that jobrelay did not create waits on worker-1.
    let foreign_jobs: Api<Job> = s.worker_api("worker-1").await;
    let foreign = jobrelay_e2e::fixtures::TestJob::new(&s.ns, "clash").run_for("1h");
    foreign_jobs
        .create(&Default::default(), &foreign.build())
        .await
        .expect("create the foreign Job");
    s.create(queued_job(&s, "clash").label(jobrelay_proto::wire::CLUSTER_KEY, "worker-1"))
        .await;
    let failed = s.wait_condition("clash", "Failed").await;
    let spec = failed.spec.as_ref().expect("spec");
    assert_eq!(spec.suspend, Some(true), "never admitted: still suspended");
    let status = failed.status.as_ref().expect("status");
    assert!(
        status.start_time.is_some(),
        "a finished Job has a start time"
    );
    let workload = workload_of(&s, "clash").await.name_any();
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    wait::until(
        "Kueue finishing the refused Job's Workload",
        WAIT,
        || async {
            match workloads.get_opt(&workload).await {
                Ok(Some(w)) if w.has("Finished") => Seen::Ready(()),
                Ok(None) => Seen::Ready(()),
                Ok(Some(w)) => Seen::Waiting(format!("{:?}", w.status.map(|st| st.conditions))),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    s.finish(WAIT).await;
    foreign_jobs
        .delete("clash", &kube::api::DeleteParams::background())
        .await
        .expect("delete the foreign Job");
}

#[tokio::test]
async fn parameters_keep_a_checks_workloads_on_its_worker_clusters_and_bad_ones_show() {
    let (clusters, relay) = setup().await;
    let s = Scenario::new(clusters, relay, "pinnedcq").await;
    let client = kit::client(clusters.manager()).await;
    let check = |name: &str, group: &str, kind: &str, target: &str| {
        json!({
            "metadata": {"name": name},
            "spec": {
                "controllerName": jobrelay_proto::wire::MANAGED_BY,
                "parameters": {"apiGroup": group, "kind": kind, "name": target},
            },
        })
    };
    // A WorkerClusterSet of worker-2 alone, in the spirit of MultiKueueConfig.
    let set_name = format!("only-w2-{}", s.ns);
    let sets: Api<WorkerClusterSet> = Api::all(client.clone());
    let set = WorkerClusterSet::new(
        &set_name,
        WorkerClusterSetSpec {
            clusters: vec!["worker-2".into()],
        },
    );
    sets.patch(
        &set_name,
        &PatchParams::apply("jobrelay-e2e").force(),
        &Patch::Apply(&set),
    )
    .await
    .expect("apply the WorkerClusterSet");
    let only = format!("only-w2-{}", s.ns);
    let single = format!("single-{}", s.ns);
    let unknown = format!("unknown-{}", s.ns);
    let no_set = format!("no-set-{}", s.ns);
    let invalid = format!("invalid-{}", s.ns);
    for (name, body) in [
        (
            &only,
            check(&only, "jobrelay.dev", "WorkerClusterSet", &set_name),
        ),
        (
            &single,
            check(&single, "jobrelay.dev", "WorkerCluster", "worker-1"),
        ),
        (
            &unknown,
            check(&unknown, "jobrelay.dev", "WorkerCluster", "worker-9"),
        ),
        (
            &no_set,
            check(&no_set, "jobrelay.dev", "WorkerClusterSet", "missing"),
        ),
        (
            &invalid,
            check(&invalid, "kueue.x-k8s.io", "MultiKueueConfig", "c"),
        ),
    ] {
        kueue_objects::apply(&client, "AdmissionCheck", None, body)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
    }
    let checks: Api<AdmissionCheck> = Api::all(client.clone());
    for (name, status, reason) in [
        (&only, "True", "Active"),
        (&single, "True", "Active"),
        (&unknown, "False", "UnknownCluster"),
        (&no_set, "False", "InvalidParameters"),
        (&invalid, "False", "InvalidParameters"),
    ] {
        wait::until(
            format!("AdmissionCheck {name} Active={status} ({reason})"),
            WAIT,
            || async {
                let active = checks.get(name).await.ok().and_then(|c| {
                    c.status?
                        .conditions
                        .into_iter()
                        .find(|c| c.type_ == "Active")
                });
                match active {
                    Some(c) if c.status == status && c.reason.as_deref() == Some(reason) => {
                        Seen::Ready(())
                    }
                    other => Seen::Waiting(format!("{other:?}")),
                }
            },
        )
        .await;
    }
    kueue_objects::queue(&client, &s.ns, &s.ns, 4, &only)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    for i in 0..3 {
        s.create(queued_job(&s, &format!("p{i}")).run_for("1s"))
            .await;
    }
    for i in 0..3 {
        let name = format!("p{i}");
        assert_eq!(s.assigned_worker(&name).await.name, "worker-2", "{name}");
        s.wait_condition(&name, "Complete").await;
    }
    s.finish(WAIT).await;
    for name in [&only, &single, &unknown, &no_set, &invalid] {
        let _ = checks.delete(name, &Default::default()).await;
    }
    let _ = sets.delete(&set_name, &Default::default()).await;
}
