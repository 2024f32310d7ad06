//! A stand-in AdmissionCheck controller for the MultiKueue comparison: it
//! marks its check Active and answers every Workload's check `Ready` the
//! moment Kueue reserved quota, and does nothing else. It measures Kueue's
//! own pace with a check configured, apart from whatever a real check's
//! controller does; it relays nothing.

use futures::TryStreamExt;
use jobrelay_testbed::objects::kueue_objects;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

/// The check's name, as a ClusterQueue lists it.
pub const CHECK: &str = "instant";
/// Its `spec.controllerName`.
const CONTROLLER: &str = "bench.jobrelay.dev/instant";
const FIELD_MANAGER: &str = "bench-instant-check";

/// The AdmissionCheck, Active.
pub async fn prepare(manager: &kube::Client) -> anyhow::Result<()> {
    kueue_objects::flavor(manager).await?;
    let body = json!({"metadata": {"name": CHECK}, "spec": {"controllerName": CONTROLLER}});
    kueue_objects::apply(manager, "AdmissionCheck", None, body).await?;
    let status = json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK},
        "status": {"conditions": [{
            "type": "Active", "status": "True", "reason": "Active", "message": "answered at once",
            "lastTransitionTime": Timestamp::now().to_string(),
        }]},
    });
    kueue_objects::api(manager, "AdmissionCheck", None)
        .patch_status(CHECK, &params(), &Patch::Apply(&status))
        .await?;
    Ok(())
}

fn params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// Whether `workload` has quota and this check still pending.
fn awaits_answer(workload: &Value) -> bool {
    let reserved = kueue_objects::condition_true(workload, "QuotaReserved");
    let checks = workload["status"]["admissionChecks"].as_array();
    let pending = checks
        .into_iter()
        .flatten()
        .any(|c| c["name"] == CHECK && c["state"] == "Pending");
    reserved && pending
}

/// Answers the check on every Workload of `namespace` until aborted.
pub fn answer(manager: &kube::Client, namespace: &str) -> tokio::task::JoinHandle<()> {
    let api = kueue_objects::api(manager, "Workload", Some(namespace));
    tokio::spawn(async move {
        let events = watcher(api.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects();
        let _ = events
            .try_for_each(|workload| {
                let api = api.clone();
                async move {
                    let value = serde_json::to_value(&workload).unwrap_or_default();
                    if awaits_answer(&value) {
                        let body = json!({
                            "apiVersion": "kueue.x-k8s.io/v1beta2",
                            "kind": "Workload",
                            "metadata": {"name": workload.name_any()},
                            "status": {"admissionChecks": [{
                                "name": CHECK, "state": "Ready", "message": "answered at once",
                                "lastTransitionTime": Timestamp::now().to_string(),
                            }]},
                        });
                        let _ = api
                            .patch_status(&workload.name_any(), &params(), &Patch::Apply(&body))
                            .await;
                    }
                    Ok(())
                }
            })
            .await;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload(reserved: &str, state: &str) -> Value {
        json!({"status": {
            "conditions": [{"type": "QuotaReserved", "status": reserved}],
            "admissionChecks": [{"name": CHECK, "state": state}],
        }})
    }

    #[test]
    fn a_workload_with_quota_and_the_check_pending_is_answered() {
        assert!(awaits_answer(&workload("True", "Pending")));
    }

    #[test]
    fn a_workload_without_quota_or_already_answered_is_left_alone() {
        assert!(!awaits_answer(&workload("False", "Pending")));
        assert!(!awaits_answer(&workload("True", "Ready")));
    }
}
