//! Finding Kueue on the manager cluster: looked for at start and every
//! [`DISCOVERY_INTERVAL`] until it is installed; then the caches the
//! admission check reads are filled and its controllers run.

use std::time::Duration;

use jobrelay_process::{Shutdown, Tasks};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use tokio::sync::mpsc;
use tracing::{debug, info};

use super::CONTROLLER_NAME;
use super::controller::{Context, run};
use super::types::{AdmissionCheck, ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use crate::clusters::worker_cluster_set::WorkerClusterSet;

/// How often the manager looks for Kueue while it is not installed.
pub(crate) const DISCOVERY_INTERVAL: Duration = Duration::from_secs(30);

/// Whether the manager cluster serves Kueue's Workloads (Kueue installed);
/// `None` when the API server could not say.
pub(crate) async fn installed(client: &kube::Client) -> Option<bool> {
    let workloads: Api<Workload> = Api::all(client.clone());
    match workloads
        .list_metadata(&kube::api::ListParams::default().limit(1))
        .await
    {
        Ok(_) => Some(true),
        Err(kube::Error::Api(status)) if status.is_not_found() => Some(false),
        Err(error) => {
            debug!(%error, "cannot tell whether Kueue is installed yet");
            None
        }
    }
}

/// What fills the caches of a [`Context`] once Kueue is found.
pub struct Writers {
    checks: reflector::store::Writer<AdmissionCheck>,
    flavors: reflector::store::Writer<ResourceFlavor>,
    sets: reflector::store::Writer<WorkerClusterSet>,
    cluster_queues: reflector::store::Writer<ClusterQueue>,
    local_queues: reflector::store::Writer<LocalQueue>,
}

/// The caches a [`Context`] reads: AdmissionChecks, ResourceFlavors,
/// WorkerClusterSets, and the queues that list the checks.
pub struct Stores {
    pub checks: Store<AdmissionCheck>,
    pub flavors: Store<ResourceFlavor>,
    pub sets: Store<WorkerClusterSet>,
    pub cluster_queues: Store<ClusterQueue>,
    pub local_queues: Store<LocalQueue>,
}

/// The (empty) caches, and their writers for [`run_when_installed`].
pub fn stores() -> (Stores, Writers) {
    let (checks, checks_writer) = reflector::store();
    let (flavors, flavors_writer) = reflector::store();
    let (sets, sets_writer) = reflector::store();
    let (cluster_queues, cluster_queues_writer) = reflector::store();
    let (local_queues, local_queues_writer) = reflector::store();
    let writers = Writers {
        checks: checks_writer,
        flavors: flavors_writer,
        sets: sets_writer,
        cluster_queues: cluster_queues_writer,
        local_queues: local_queues_writer,
    };
    (
        Stores {
            checks,
            flavors,
            sets,
            cluster_queues,
            local_queues,
        },
        writers,
    )
}

/// Looks for Kueue until it is installed (now, or every
/// [`DISCOVERY_INTERVAL`] after), then fills the caches and runs the
/// controllers until shutdown.
pub async fn run_when_installed(
    ctx: Context,
    writers: Writers,
    shutdown: Shutdown,
    woken: mpsc::UnboundedReceiver<ObjectRef<Workload>>,
    tasks: Tasks,
) {
    let mut said = false;
    loop {
        let found = installed(&ctx.client).await;
        if let Some(found) = found {
            ctx.reservations.set_manager_kueue(found);
        }
        if found == Some(true) {
            break;
        }
        if !said {
            info!(
                "Kueue is not installed: relayed Jobs are dispatched directly; looking again every {}s",
                DISCOVERY_INTERVAL.as_secs()
            );
            said = true;
        }
        tokio::select! {
            () = tokio::time::sleep(DISCOVERY_INTERVAL) => {}
            () = shutdown.clone().requested() => return,
        }
    }
    info!("Kueue is installed: answering AdmissionChecks with controllerName {CONTROLLER_NAME}");
    let Writers {
        checks,
        flavors,
        sets,
        cluster_queues,
        local_queues,
    } = writers;
    fill(&ctx.client, checks, &tasks);
    fill(&ctx.client, flavors, &tasks);
    fill(&ctx.client, sets, &tasks);
    fill(&ctx.client, cluster_queues, &tasks);
    fill(&ctx.client, local_queues, &tasks);
    run(ctx, shutdown, woken).await;
}

/// Fills `writer`'s cache with every object of its kind (of every
/// namespace), trimmed.
fn fill<K>(client: &kube::Client, writer: reflector::store::Writer<K>, tasks: &Tasks)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    crate::caches::cache(
        Api::<K>::all(client.clone()),
        jobrelay_process::cache::trim,
        writer,
        |_| {},
        tasks,
    );
}
