//! A Kueue scenario's Workloads and the worker Pods of its mirrors.

use std::collections::BTreeMap;

use jobrelay_manager::kueue::types::Workload;
use jobrelay_proto::wire::{ORIGIN_LABEL, ORIGIN_UID_LABEL};
use jobrelay_testbed::wait::{self, Seen, WAIT};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

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
