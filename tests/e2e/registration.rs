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

/// What is presented, as which cluster, the gRPC status it gets (none when
/// the handshake refuses it), and the reason it is counted under.
type RefusalCase = (
    &'static str,
    Result<Issued, jobrelay_testbed::certs::Error>,
    &'static str,
    Option<Code>,
    &'static str,
);

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

#[path = "registration/identity.rs"]
mod identity;
#[path = "registration/link.rs"]
mod link;
#[path = "registration/lost.rs"]
mod lost;
#[path = "registration/placement.rs"]
mod placement;
