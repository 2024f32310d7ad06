//! A relayed Job in full, as `describe` shows it: the manager Job, its
//! Workload, its mirror and everything jobrelay recorded on the Job, why
//! its Pods wait or failed, and its Events.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::annotations::{self, Annotation};
use super::events::{self, EventView};
use super::job::{self, JobStatus};
use super::kueue::KueueView;
use super::mirror::{self, MirrorState};
use super::pods::{self, PodsReport};
use jobrelay_proto::wire::PODS_ANNOTATION;

/// What `describe` shows, with stable field names for `-o json|yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub managed_by: Option<String>,
    pub created: Option<Timestamp>,
    pub status: JobStatus,
    /// jobrelay's remote-cleanup finalizer holds the Job.
    pub finalizer: bool,
    pub kueue: Option<KueueView>,
    pub mirror: Mirror,
    pub pods: Option<PodsReport>,
    pub events: Vec<EventView>,
}

/// What the manager knows of the mirror.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mirror {
    pub cluster: Option<String>,
    pub state: MirrorState,
    /// Every `jobrelay.dev/` annotation on the Job, with what it means.
    pub annotations: Vec<Annotation>,
}

/// The description of `job`, with its Workload and its Events.
pub fn describe(job: &Job, kueue: Option<KueueView>, job_events: &[Event]) -> Description {
    let meta = &job.metadata;
    Description {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        managed_by: job::managed_by(job).map(String::from),
        created: job::created(job),
        status: job::status(job),
        finalizer: job::has_finalizer(job),
        kueue,
        mirror: Mirror {
            cluster: mirror::cluster(job).map(String::from),
            state: mirror::state(job),
            annotations: annotations::jobrelay(&meta.annotations.clone().unwrap_or_default()),
        },
        pods: job::annotation(job, PODS_ANNOTATION).map(pods::read),
        events: events::list(job_events),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::view::events::tests::event;
    use crate::view::job::tests::job;
    use crate::view::kueue::{tests::workload, view};
    use jobrelay_proto::wire::{CLUSTER_KEY, PLACEMENT_SEAL_ANNOTATION, REMOTE_CLEANUP_FINALIZER};
    use serde_json::json;

    /// A Job running on worker-1 behind Kueue, one Pod waiting for its
    /// image, with the manager's Events and a worker's warning.
    pub(crate) fn train() -> Description {
        let train = job(
            "train",
            json!({
                "metadata": {
                    "annotations": {
                        CLUSTER_KEY: "worker-1",
                        PLACEMENT_SEAL_ANNOTATION: "c2VhbA",
                        PODS_ANNOTATION: "cluster worker-1 (1 Pending, 1 Running): 1 Pod wait ErrImagePull (container main): pull access denied for trainer:9",
                        "kueue.x-k8s.io/queue-name": "team-a",
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
        let events = [
            event(
                "PodsWaiting",
                "2026-11-28T11:56:30.000000Z",
                Some((4, "2026-11-28T11:59:00.000000Z")),
                "on cluster worker-1, 1 Pod wait ErrImagePull (container main): pull access denied for trainer:9",
            ),
            event(
                "Dispatched",
                "2026-11-28T11:56:00.000000Z",
                None,
                "sent to cluster worker-1 (revision 1)",
            ),
            event(
                "WorkerWarning",
                "2026-11-28T11:57:00.000000Z",
                None,
                "on cluster worker-1, Pod ml/train-x7k2p: FailedMount (kubelet): secret \"creds\" not found",
            ),
        ];
        describe(&train, Some(view(&admitted, Some(&ours))), &events)
    }

    #[test]
    fn a_description_gathers_the_job_its_mirror_its_pods_and_its_events() {
        let described = train();
        assert_eq!(described.mirror.cluster.as_deref(), Some("worker-1"));
        assert_eq!(described.mirror.state, MirrorState::Running);
        let keys: Vec<&str> = described
            .mirror
            .annotations
            .iter()
            .map(|a| a.key.as_str())
            .collect();
        assert_eq!(
            keys,
            [CLUSTER_KEY, PLACEMENT_SEAL_ANNOTATION, PODS_ANNOTATION]
        );
        assert_eq!(described.pods.as_ref().map(|p| p.reasons.len()), Some(1));
        let reasons: Vec<&str> = described.events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(reasons, ["Dispatched", "WorkerWarning", "PodsWaiting"]);
        let structured = serde_json::to_value(&described).expect("JSON");
        assert_eq!(
            structured["mirror"]["annotations"][0]["label"],
            "Placed on cluster"
        );
        assert_eq!(structured["managedBy"], "jobrelay.dev/manager");
        assert_eq!(structured["events"][2]["count"], 4);
    }
}
