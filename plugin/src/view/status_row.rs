//! One relayed Job as `status` shows it: its Kueue Workload, where its
//! mirror is and how it stands, why its Pods wait, the status jobrelay
//! copied back, and whether jobrelay's finalizer holds it.

use jobrelay_proto::wire::{DISPATCH_WAITING_ANNOTATION, MIRRORS_LOST_ANNOTATION, PODS_ANNOTATION};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::job::{self, JobStatus};
use super::kueue::KueueView;
use super::mirror::{self, MirrorState};
use super::pods::{self, PodsReport};

/// A row of `status`, with stable field names for `-o json|yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusRow {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The Job's Workload; `None` without Kueue or without a Workload.
    pub kueue: Option<KueueView>,
    /// The worker cluster jobrelay placed the mirror on.
    pub cluster: Option<String>,
    pub mirror: MirrorState,
    /// Why Pods of the mirror wait or failed on the worker.
    pub pods: Option<PodsReport>,
    pub status: JobStatus,
    /// jobrelay's remote-cleanup finalizer holds the Job.
    pub finalizer: bool,
    /// The worker's refusal the agent retries.
    pub dispatch_waiting: Option<String>,
    /// Mirrors lost behind jobrelay's back.
    pub mirrors_lost: u32,
    pub created: Option<Timestamp>,
}

/// The row of `job`, with its Workload if it has one.
pub fn row(job: &Job, kueue: Option<KueueView>) -> StatusRow {
    let text = |key: &str| job::annotation(job, key).map(String::from);
    StatusRow {
        namespace: job.metadata.namespace.clone().unwrap_or_default(),
        name: job.metadata.name.clone().unwrap_or_default(),
        uid: job.metadata.uid.clone().unwrap_or_default(),
        kueue,
        cluster: mirror::cluster(job).map(String::from),
        mirror: mirror::state(job),
        pods: job::annotation(job, PODS_ANNOTATION).map(pods::read),
        status: job::status(job),
        finalizer: job::has_finalizer(job),
        dispatch_waiting: text(DISPATCH_WAITING_ANNOTATION),
        mirrors_lost: job::annotation(job, MIRRORS_LOST_ANNOTATION)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        created: job::created(job),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::view::job::tests::job;
    use crate::view::kueue::{tests::workload, view};
    use jobrelay_proto::wire::{CLUSTER_KEY, REMOTE_CLEANUP_FINALIZER};
    use serde_json::json;

    /// Three Jobs in their typical states: one running on worker-1 behind
    /// Kueue with a Pod waiting, one refused by worker-2, one finished and
    /// released.
    pub(crate) fn rows() -> Vec<StatusRow> {
        let train = job(
            "train",
            json!({
                "metadata": {
                    "annotations": {
                        CLUSTER_KEY: "worker-1",
                        PODS_ANNOTATION: "cluster worker-1 (1 Pending, 1 Running): 1 Pod wait ErrImagePull (container main): pull access denied",
                    },
                    "finalizers": [REMOTE_CLEANUP_FINALIZER],
                },
                "status": {"startTime": "2026-11-28T11:56:00Z", "active": 2, "ready": 1},
            }),
        );
        let admitted = workload(
            "train",
            &[("QuotaReserved", "True"), ("Admitted", "True")],
            "Ready",
        );
        let ours = ["jobrelay".to_string()].into();
        let refused = job(
            "etl",
            json!({
                "metadata": {
                    "annotations": {
                        CLUSTER_KEY: "worker-2",
                        DISPATCH_WAITING_ANNOTATION: "cluster worker-2 refused the Job (NAMESPACE_MISSING): namespaces \"ml\" not found",
                    },
                    "finalizers": [REMOTE_CLEANUP_FINALIZER],
                },
            }),
        );
        let done = job(
            "report",
            json!({
                "metadata": {"annotations": {CLUSTER_KEY: "worker-1", MIRRORS_LOST_ANNOTATION: "1"}},
                "status": {"startTime": "2026-11-28T11:56:00Z", "succeeded": 1,
                    "conditions": [{"type": "Complete", "status": "True", "reason": "CompletionsReached"}]},
            }),
        );
        vec![
            row(&train, Some(view(&admitted, Some(&ours)))),
            row(&refused, None),
            row(&done, None),
        ]
    }

    #[test]
    fn a_row_gathers_what_jobrelay_shows_of_a_job() {
        let [train, refused, done] = <[StatusRow; 3]>::try_from(rows()).expect("three rows");
        assert_eq!(train.cluster.as_deref(), Some("worker-1"));
        assert_eq!(train.mirror, MirrorState::Running);
        assert!(train.finalizer);
        assert_eq!(
            train.pods.as_ref().map(PodsReport::short).as_deref(),
            Some("1 Pod wait ErrImagePull (container main)")
        );
        assert_eq!(
            train.kueue.as_ref().map(KueueView::cell).as_deref(),
            Some("Admitted (jobrelay: Ready)")
        );
        assert_eq!(refused.mirror, MirrorState::Refused);
        assert!(refused.dispatch_waiting.is_some());
        assert_eq!(done.mirror, MirrorState::Gone);
        assert_eq!(done.mirrors_lost, 1);
        assert!(!done.finalizer);
    }

    #[test]
    fn the_structured_row_has_stable_field_names() {
        let row = serde_json::to_value(&rows()[0]).expect("JSON");
        let mut keys: Vec<&str> = row
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "cluster",
                "created",
                "dispatchWaiting",
                "finalizer",
                "kueue",
                "mirror",
                "mirrorsLost",
                "name",
                "namespace",
                "pods",
                "status",
                "uid"
            ]
        );
        assert_eq!(row["mirror"], "Running");
        assert_eq!(row["status"]["phase"], "Running");
        assert_eq!(row["kueue"]["state"], "Admitted");
        assert_eq!(row["created"], "2026-11-28T11:55:00Z");
    }
}
