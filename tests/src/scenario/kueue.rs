//! A Kueue scenario's Workloads, the worker Pods of its mirrors, and the
//! WorkerClusterSets and AdmissionChecks it places them by.

use std::collections::BTreeMap;

use jobrelay_manager::clusters::worker_cluster_set::{
    SetPlacement, WorkerClusterSet, WorkerClusterSetSpec,
};
use jobrelay_manager::kueue::types::{AdmissionCheck, Workload};
use jobrelay_proto::wire::{ORIGIN_LABEL, ORIGIN_UID_LABEL};
use jobrelay_testbed::objects::kueue_objects;
use jobrelay_testbed::wait::{self, Seen, WAIT};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::Scenario;

/// The Workload Kueue made for the manager Job `name`.
pub async fn workload_of(s: &Scenario, name: &str) -> Workload {
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    wait::until(format!("the Workload of Job {name}"), WAIT, || async {
        match workloads.list(&ListParams::default()).await {
            Ok(list) => match list
                .items
                .into_iter()
                .find(|w| w.owner_job().is_some_and(|(n, _)| n == name))
            {
                Some(w) => Seen::Ready(w),
                None => Seen::Waiting("none yet".into()),
            },
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await
}

/// Worker Pods of this namespace's mirrors that are not terminating, by
/// origin UID.
pub async fn live_worker_pods(s: &Scenario) -> BTreeMap<String, usize> {
    let mut live = BTreeMap::new();
    let selector = ListParams::default().labels(&format!("{ORIGIN_LABEL}={}", s.relay.origin));
    for worker in s.clusters.workers() {
        let pods: Api<Pod> = s.worker_api(&worker.name).await;
        for pod in pods
            .list(&selector)
            .await
            .map(|l| l.items)
            .unwrap_or_default()
        {
            let phase = pod
                .status
                .as_ref()
                .and_then(|st| st.phase.clone())
                .unwrap_or_default();
            if pod.metadata.deletion_timestamp.is_none()
                && (phase == "Running" || phase == "Pending")
            {
                *live
                    .entry(
                        pod.labels()
                            .get(ORIGIN_UID_LABEL)
                            .cloned()
                            .unwrap_or_default(),
                    )
                    .or_insert(0) += 1;
            }
        }
    }
    live
}

/// Worker Pods of one origin UID, terminating or not; an error names the
/// worker that could not be asked (a test waits on, never asserts on, that).
pub async fn worker_pods_of(s: &Scenario, uid: &str) -> Result<usize, String> {
    let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
    let mut count = 0;
    for worker in s.clusters.workers() {
        let pods: Api<Pod> = s.worker_api(&worker.name).await;
        count += pods
            .list(&selector)
            .await
            .map_err(|e| format!("listing Pods on {}: {e}", worker.name))?
            .items
            .len();
    }
    Ok(count)
}

/// Applies the WorkerClusterSet `name` of `clusters`, placed by
/// `placement`.
pub async fn apply_set(
    client: &kube::Client,
    name: &str,
    clusters: &[&str],
    placement: SetPlacement,
) {
    let sets: Api<WorkerClusterSet> = Api::all(client.clone());
    let set = WorkerClusterSet::new(
        name,
        WorkerClusterSetSpec {
            clusters: clusters.iter().map(|c| c.to_string()).collect(),
            placement,
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

/// A WorkerClusterSet `name` of `clusters`, placed by `placement`, and an
/// AdmissionCheck of the same name whose parameters name it.
pub async fn check_of_set(
    client: &kube::Client,
    name: &str,
    clusters: &[&str],
    placement: SetPlacement,
) {
    apply_set(client, name, clusters, placement).await;
    let parameters = json!({"apiGroup": "jobrelay.dev", "kind": "WorkerClusterSet", "name": name});
    kueue_objects::admission_check(client, name, Some(parameters))
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
}

/// Deletes what [`check_of_set`] made.
pub async fn drop_check_of_set(client: &kube::Client, name: &str) {
    let _ = Api::<AdmissionCheck>::all(client.clone())
        .delete(name, &Default::default())
        .await;
    let _ = Api::<WorkerClusterSet>::all(client.clone())
        .delete(name, &Default::default())
        .await;
}

/// Waits until the scenario's ClusterQueue (named after its namespace)
/// holds no quota: no Workload reserving or admitted, every flavor's
/// reservation at zero.
pub async fn quota_back_to_zero(s: &Scenario) {
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
