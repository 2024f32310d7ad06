//! Cluster registration end to end: WorkerCluster status, mutual TLS
//! identity and the connections it refuses, certificate rotation, the gRPC
//! health service, liveness of the link, Lost clusters, and placement by
//! namespace selector. These tests kill and restart processes, so they run
//! one at a time.

use std::time::{Duration, Instant};

use jobrelay_e2e::scenario::Scenario;
use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_process::Pem;
use jobrelay_process::health::RELAY;
use jobrelay_proto::v1::relay_client::RelayClient;
use jobrelay_proto::v1::{AgentMessage, Hello, agent_message};
use jobrelay_proto::wire::{CLUSTER_KEY, DEACTIVATED_ANNOTATION, ORIGIN_UID_LABEL};
use jobrelay_testbed::certs::{Issued, RelayCa};
use jobrelay_testbed::kit::{self, Clusters};
use jobrelay_testbed::relay::{Relay, serving_status};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use tonic::Code;
use tonic::transport::Endpoint;
use tonic_health::pb::health_check_response::ServingStatus;

#[path = "registration/durations.rs"]
mod durations;
#[path = "registration/identity.rs"]
mod identity;
#[path = "registration/lost.rs"]
mod lost;

const TIMEOUT: Duration = Duration::from_secs(90);
const WORKER_A: &str = "worker-1";
const WORKER_B: &str = "worker-2";

/// Only one test at a time kills processes or changes registrations.
static EXCLUSIVE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn setup() -> (&'static Clusters, &'static Relay, Api<WorkerCluster>) {
    let (clusters, relay) = kit::relay().await;
    let registrations = Api::all(kit::client(clusters.manager()).await);
    (clusters, relay, registrations)
}

/// The status of condition `kind` on `cluster`'s WorkerCluster ("" if unset).
async fn condition(registrations: &Api<WorkerCluster>, cluster: &str, kind: &str) -> String {
    match registrations.get(cluster).await {
        Ok(wc) => wc
            .condition(kind)
            .map(|c| c.status.clone())
            .unwrap_or_default(),
        Err(error) => format!("error: {error}"),
    }
}

async fn wait_condition(
    registrations: &Api<WorkerCluster>,
    cluster: &str,
    kind: &str,
    status: &str,
) -> Duration {
    let started = Instant::now();
    wait::until(
        format!("WorkerCluster {cluster} {kind}={status}"),
        TIMEOUT,
        || async {
            let seen = condition(registrations, cluster, kind).await;
            if seen == status {
                Seen::Ready(started.elapsed())
            } else {
                Seen::Waiting(format!("{kind}={seen:?}"))
            }
        },
    )
    .await
}

async fn set_spec(registrations: &Api<WorkerCluster>, cluster: &str, spec: serde_json::Value) {
    let patch = serde_json::json!({ "spec": spec });
    registrations
        .patch(cluster, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching WorkerCluster {cluster}: {e}"));
}

async fn wait_health(addr: &str, service: &str, expected: ServingStatus) {
    wait::until(
        format!("health of {service:?} at {addr} to be {expected:?}"),
        TIMEOUT,
        || async {
            match serving_status(addr, service).await {
                Ok(status) if status == expected => Seen::Ready(()),
                other => Seen::Waiting(format!("{other:?}")),
            }
        },
    )
    .await
}

async fn refused_count(relay: &Relay, reason: &str) -> f64 {
    relay
        .metric(&format!(
            "jobrelay_sessions_refused_total{{reason=\"{reason}\"}}"
        ))
        .await
        .expect("read metrics")
        .unwrap_or(0.0)
}

/// Waits until refusals for `reason` counted more than `before`.
async fn wait_refused(relay: &Relay, reason: &str, before: f64) {
    wait::until(
        format!("a refusal counted as {reason}"),
        TIMEOUT,
        || async {
            let now = refused_count(relay, reason).await;
            if now > before {
                Seen::Ready(())
            } else {
                Seen::Waiting(format!("{now} {reason} refusals"))
            }
        },
    )
    .await
}

use futures::StreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn worker_clusters_show_their_agents_and_a_killed_agent_shows_disconnected() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (clusters, relay, registrations) = setup().await;
    for worker in clusters.workers() {
        wait_condition(&registrations, &worker.name, "Connected", "True").await;
        wait_condition(&registrations, &worker.name, "Lost", "False").await;
        let wc = registrations.get(&worker.name).await.unwrap();
        let status = wc.status.unwrap();
        assert_eq!(
            status.agent_version.as_deref(),
            Some(env!("CARGO_PKG_VERSION"))
        );
        assert!(status.last_heartbeat_time.is_some(), "{status:?}");
    }

    // `kubectl get wc` reads as the columns promise.
    let kubectl = jobrelay_testbed::go::controlplane::cached()
        .unwrap()
        .path("kubectl");
    let output = std::process::Command::new(kubectl)
        .env("KUBECONFIG", &clusters.manager().kubeconfig)
        .args(["get", "wc"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&output.stdout);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "CONNECTED", "MIRRORS", "LAST-HEARTBEAT", "AGE"],
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(WORKER_A) && l.contains("True")),
        "{table}"
    );

    relay.kill_agent(WORKER_A);
    let shown = wait_condition(&registrations, WORKER_A, "Connected", "False").await;
    println!("killed agent shown Connected=False after {shown:?} (heartbeat interval 1s)");
    assert_eq!(
        condition(&registrations, WORKER_B, "Connected").await,
        "True"
    );

    let sessions = relay.sessions_opened(WORKER_A);
    relay.start_agent(WORKER_A).unwrap();
    relay.wait_sessions(WORKER_A, sessions + 1).await.unwrap();
    wait_condition(&registrations, WORKER_A, "Connected", "True").await;
}
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn health_follows_readiness_and_every_agent_rejoins_a_restarted_manager() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (clusters, relay, _registrations) = setup().await;
    let agent = relay.agent_health_addr(WORKER_A).unwrap().to_string();
    wait_health(&relay.health_addr, "", ServingStatus::Serving).await;
    wait_health(&relay.health_addr, RELAY, ServingStatus::Serving).await;
    wait_health(&agent, RELAY, ServingStatus::Serving).await;

    let sessions: Vec<usize> = clusters
        .workers()
        .iter()
        .map(|w| relay.sessions_opened(&w.name))
        .collect();
    relay.kill_manager();
    // Without its manager the agent is alive but not ready.
    wait_health(&agent, RELAY, ServingStatus::NotServing).await;
    wait_health(&agent, "", ServingStatus::Serving).await;

    let restarted = Instant::now();
    relay.start_manager().unwrap();
    for (worker, before) in clusters.workers().iter().zip(sessions) {
        relay.wait_sessions(&worker.name, before + 1).await.unwrap();
    }
    println!(
        "all {} agents rejoined the restarted manager within {:?}",
        clusters.workers().len(),
        restarted.elapsed()
    );
    wait_health(&relay.health_addr, RELAY, ServingStatus::Serving).await;
    wait_health(&agent, RELAY, ServingStatus::Serving).await;
}

async fn events_with_reason(manager: &kube::Client, ns: &str, name: &str, reason: &str) -> usize {
    let events: Api<Event> = Api::namespaced(manager.clone(), ns);
    events
        .list(&ListParams::default())
        .await
        .map(|list| {
            list.items
                .iter()
                .filter(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                        && e.reason.as_deref() == Some(reason)
                })
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn placement_honours_the_namespace_selector() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (clusters, relay, registrations) = setup().await;
    let scenario = Scenario::new(clusters, relay, "selector").await;
    let (ns, jobs) = (scenario.ns.clone(), scenario.jobs.clone());
    let manager = kit::client(clusters.manager()).await;
    // worker-1 takes only namespaces of team b; this one is team a.
    let namespaces: Api<Namespace> = Api::all(manager.clone());
    let label = serde_json::json!({"metadata": {"labels": {"team": "a"}}});
    namespaces
        .patch(&ns, &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    set_spec(
        &registrations,
        WORKER_A,
        serde_json::json!({"namespaceSelector": {"matchLabels": {"team": "b"}}}),
    )
    .await;
    // The manager's caches see both changes before the Jobs arrive.
    wait::until(
        "the manager's cache sees the new selector",
        TIMEOUT,
        || async {
            let probe = scenario.job("probe").label(CLUSTER_KEY, WORKER_A).build();
            let _ = jobs.create(&PostParams::default(), &probe).await;
            if events_with_reason(&manager, &ns, "probe", "Unplaceable").await > 0 {
                Seen::Ready(())
            } else {
                Seen::Waiting("no Unplaceable Event on the pinned probe yet".into())
            }
        },
    )
    .await;
    let probe = jobs.get("probe").await.unwrap();
    assert!(
        probe.annotations().get(CLUSTER_KEY).is_none(),
        "the pinned probe was not sent"
    );

    for i in 0..4 {
        let job = scenario.job(&format!("spread-{i}")).run_for("1s").build();
        jobs.create(&PostParams::default(), &job).await.unwrap();
    }
    let placed = wait::until("every Job placed", TIMEOUT, || async {
        let mut placed = Vec::new();
        for i in 0..4 {
            match jobs
                .get(&format!("spread-{i}"))
                .await
                .ok()
                .and_then(|j| j.annotations().get(CLUSTER_KEY).cloned())
            {
                Some(cluster) => placed.push(cluster),
                None => return Seen::Waiting(format!("{} placed", placed.len())),
            }
        }
        Seen::Ready(placed)
    })
    .await;
    assert!(
        placed.iter().all(|c| c == WORKER_B),
        "team a runs only where admitted: {placed:?}"
    );

    set_spec(
        &registrations,
        WORKER_A,
        serde_json::json!({"namespaceSelector": null}),
    )
    .await;
    scenario.finish(TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_manager_refuses_to_start_without_the_crd() {
    let clusters = kit::clusters(2);
    let (manager_bin, _) = jobrelay_testbed::relay::binaries::binaries().unwrap();
    // A worker cluster has no WorkerCluster CRD.
    let mut manager = std::process::Command::new(manager_bin);
    manager
        .env("KUBECONFIG", &clusters.workers()[0].kubeconfig)
        .args(["--origin", "e2e-no-crd", "--insecure-plaintext"])
        .args(["--listen", "127.0.0.1:0", "--health-listen", "127.0.0.1:0"])
        .args(["--metrics-listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = jobrelay_testbed::host::processes::spawn(manager).unwrap();
    let exited = tokio::task::spawn_blocking(move || child.wait_with_output());
    let output = tokio::time::timeout(TIMEOUT, exited)
        .await
        .expect("the manager should exit when the CRD is missing")
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("the WorkerCluster CRD (workerclusters.jobrelay.dev) is not installed"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_a_worker_cluster_ends_its_session_until_it_is_registered_again() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (_clusters, relay, registrations) = setup().await;
    wait_condition(&registrations, WORKER_B, "Connected", "True").await;
    let unknown = refused_count(relay, "unknown_cluster").await;
    registrations
        .delete(WORKER_B, &DeleteParams::default())
        .await
        .unwrap();
    wait_refused(relay, "unknown_cluster", unknown).await;
    assert!(
        relay.agent_log(WORKER_B).contains("PermissionDenied"),
        "the agent logs why it was refused"
    );

    let sessions = relay.sessions_opened(WORKER_B);
    let registration = WorkerCluster::new(WORKER_B, Default::default());
    registrations
        .create(&PostParams::default(), &registration)
        .await
        .unwrap();
    relay.wait_sessions(WORKER_B, sessions + 1).await.unwrap();
    wait_condition(&registrations, WORKER_B, "Connected", "True").await;
}
