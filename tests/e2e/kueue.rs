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

#[path = "kueue/active.rs"]
mod active;
#[path = "kueue/counts.rs"]
mod counts;
#[path = "kueue/eviction.rs"]
mod eviction;
#[path = "kueue/flavors.rs"]
mod flavors;
#[path = "kueue/held_pods.rs"]
mod held_pods;
#[path = "kueue/lost.rs"]
mod lost;
#[path = "kueue/not_ours.rs"]
mod not_ours;
#[path = "kueue/parameters.rs"]
mod parameters;
#[path = "kueue/plain_path.rs"]
mod plain_path;
#[path = "kueue/refused.rs"]
mod refused;
#[path = "kueue/tas.rs"]
mod tas;
#[path = "kueue/webhook.rs"]
mod webhook;
#[path = "kueue/worker_side.rs"]
mod worker_side;

use std::collections::BTreeMap;
use std::time::Duration;

use jobrelay_e2e::scenario::{Scenario, WAIT, has_condition};
use jobrelay_e2e::scenario::{
    apply_set, check_of_set, drop_check_of_set, live_worker_pods, quota_back_to_zero,
    worker_pods_of, workload_of,
};
use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_manager::clusters::worker_cluster_set::{
    SetPlacement, WorkerClusterSet, WorkerClusterSetSpec,
};
use jobrelay_manager::kueue::types::{AdmissionCheck, AdmissionCheckState, CheckState, Workload};
use jobrelay_proto::wire::{AVOID_UNTIL_ANNOTATION, CLUSTER_KEY, WITHDRAWN_FROM_ANNOTATION};
use jobrelay_testbed::controllers::kueue::{Kueue, Settings};
use jobrelay_testbed::kit::{self, Clusters};
use jobrelay_testbed::objects::kueue_objects;
use jobrelay_testbed::objects::kueue_objects::LOCAL_QUEUE;
use jobrelay_testbed::relay::proxy::Mode;
use jobrelay_testbed::relay::{Options, Relay};
use jobrelay_testbed::wait::{self, Seen};
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
                // The lost-worker scenario cuts worker-4's link.
                proxied: true,
                // worker-3 reports its Kueue's quota (the others run none).
                agent_args: vec!["--room-kueue".into()],
                ..Options::default()
            };
            let (clusters, relay) = kit::relay_with(4, options).await;
            let client = kit::client(clusters.manager()).await;
            let prioritised = async {
                let (plain, own) = ("kueue-plain", "kueue-worker");
                apply_set(&client, plain, &["worker-1", "worker-2"], SetPlacement::MostRoom).await;
                apply_set(&client, own, &[KUEUE_WORKER], SetPlacement::MostRoom).await;
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

/// Waits until the one-Pod manager Job `name` shows its Pod ready: Kueue
/// then counts its Pods ready, so `waitForPodsReady` does not evict it.
async fn pod_ready_on_manager(s: &Scenario, name: &str) {
    wait::until(
        format!("the Pod of Job {name} shown ready"),
        WAIT,
        || async {
            match s.jobs.get(name).await {
                Ok(job) if job.status.as_ref().and_then(|st| st.ready) == Some(1) => {
                    Seen::Ready(())
                }
                Ok(job) => Seen::Waiting(format!("{:?}", job.status)),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
}

/// Waits until AdmissionCheck `name` shows `Active` `status` for `reason`;
/// its message.
async fn check_active(client: &kube::Client, name: &str, status: &str, reason: &str) -> String {
    let checks: Api<AdmissionCheck> = Api::all(client.clone());
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
                    Seen::Ready(c.message.unwrap_or_default())
                }
                other => Seen::Waiting(format!("{other:?}")),
            }
        },
    )
    .await
}

/// Waits until check `check` of the Workload `name` in `workloads` is
/// `what` (`shown` says of it); the check then.
async fn check_shows(
    workloads: &Api<Workload>,
    (name, check): (&str, &str),
    what: &str,
    shown: impl Fn(&AdmissionCheckState) -> bool,
) -> AdmissionCheckState {
    wait::until(
        format!("check {check} of Workload {name} {what}"),
        WAIT,
        || async {
            match workloads.get(name).await.map(|w| w.check(check).cloned()) {
                Ok(Some(state)) if shown(&state) => Seen::Ready(state),
                other => Seen::Waiting(format!("{other:?}")),
            }
        },
    )
    .await
}

/// Sets the Workload `name`'s `spec.active` in `workloads` (false: Kueue
/// evicts it, as an administrator deactivating it would see).
async fn set_active(workloads: &Api<Workload>, name: &str, active: bool) {
    workloads
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"active": active}})),
        )
        .await
        .unwrap_or_else(|e| panic!("set Workload {name}'s spec.active to {active}: {e}"));
}

/// A Job queued in the scenario's LocalQueue, requesting one CPU.
fn queued_job(s: &Scenario, name: &str) -> jobrelay_testbed::objects::fixtures::TestJob {
    s.job(name)
        .label(QUEUE_NAME, kueue_objects::LOCAL_QUEUE)
        .cpu("1")
}
