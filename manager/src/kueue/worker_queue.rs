//! Worker-side Kueue, as pure decisions: which mirrors are queued in a
//! worker cluster's own Kueue ([`queue_on_worker`]), when that Kueue has
//! admitted one ([`queued_mirror`]), and which clusters a Job's placement
//! tries first after a worker did not admit it in time ([`not_admitted_by`](crate::job::withdrawal::not_admitted_by)).
//!
//! A mirror queued on its worker is created suspended; from then on the
//! worker's Kueue owns its `suspend` and pod template. A manager Job evicted
//! by the manager's Kueue therefore cannot suspend such a mirror: it is
//! withdrawn (deleted, Pods first) and the Job placed again when readmitted.

use jobrelay_proto::v1::MirrorPhase;
use jobrelay_proto::wire::QUEUE_NAME_LABEL;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub use crate::clusters::worker_cluster::WorkerQueue;

use super::check::QueuedMirror;

/// Prepares the mirror for its worker: queued in the worker's Kueue (its
/// LocalQueue mapped, created suspended) when the worker runs one and the
/// Job names a queue; otherwise without a queue name, so a Kueue on the
/// worker leaves it to jobrelay. True when the mirror is queued there.
pub fn queue_on_worker(mirror: &mut Job, worker: Option<&WorkerQueue>) -> bool {
    let queued = map_queue_label(&mut mirror.metadata, worker);
    if queued && let Some(spec) = mirror.spec.as_mut() {
        spec.suspend = Some(true);
    }
    queued
}

/// The label part of [`queue_on_worker`], for a mirror of any kind: its
/// queue name mapped to the worker's LocalQueue, or removed where the
/// worker runs no Kueue. True when the mirror is queued there (and is then
/// to be created suspended).
pub fn map_queue_label(mirror: &mut ObjectMeta, worker: Option<&WorkerQueue>) -> bool {
    let labels = mirror.labels.get_or_insert_with(Default::default);
    let Some(queue) = labels.remove(QUEUE_NAME_LABEL) else {
        return false;
    };
    let Some(worker) = worker else {
        return false;
    };
    labels.insert(QUEUE_NAME_LABEL.into(), worker_local_queue(&queue, worker));
    true
}

/// The LocalQueue of the worker's Kueue that a mirror of a Job queued in
/// `queue` (its `kueue.x-k8s.io/queue-name`) is queued in there: as
/// `spec.kueue.localQueues` maps it, else under the same name.
pub fn worker_local_queue(queue: &str, worker: &WorkerQueue) -> String {
    worker
        .local_queues
        .get(queue)
        .cloned()
        .unwrap_or_else(|| queue.to_string())
}

/// Where a mirror queued on its worker and held there in `phase` stands in
/// the worker's Kueue: admitted once that Kueue unsuspended it (it then
/// runs, or already finished), suspended while it waits or once evicted.
pub fn queued_mirror(phase: MirrorPhase) -> QueuedMirror {
    match phase {
        MirrorPhase::Pending
        | MirrorPhase::Running
        | MirrorPhase::Succeeded
        | MirrorPhase::Failed => QueuedMirror::Admitted,
        MirrorPhase::Suspended => QueuedMirror::Suspended,
        MirrorPhase::Unspecified | MirrorPhase::Deleting => QueuedMirror::NotHeld,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn mirror(queue: Option<&str>) -> Job {
        let mut labels = serde_json::json!({"team": "a"});
        if let Some(queue) = queue {
            labels[QUEUE_NAME_LABEL] = queue.into();
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "labels": labels},
            "spec": {"suspend": false, "template": {}},
        }))
        .unwrap()
    }

    fn worker(map: &[(&str, &str)]) -> WorkerQueue {
        WorkerQueue {
            local_queues: map
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            admit_within: Duration::from_secs(60),
        }
    }

    fn queue_of(job: &Job) -> Option<&str> {
        job.metadata
            .labels
            .as_ref()?
            .get(QUEUE_NAME_LABEL)
            .map(String::as_str)
    }

    #[test]
    fn a_queued_job_is_queued_on_a_worker_with_kueue_under_the_mapped_name_and_suspended() {
        let mut job = mirror(Some("team-a"));
        assert!(queue_on_worker(
            &mut job,
            Some(&worker(&[("team-a", "batch")]))
        ));
        assert_eq!(queue_of(&job), Some("batch"));
        assert_eq!(job.spec.as_ref().unwrap().suspend, Some(true));
        let mut unmapped = mirror(Some("team-b"));
        assert!(queue_on_worker(
            &mut unmapped,
            Some(&worker(&[("team-a", "batch")]))
        ));
        assert_eq!(
            queue_of(&unmapped),
            Some("team-b"),
            "a queue not listed keeps its name"
        );
    }

    #[test]
    fn elsewhere_the_queue_name_is_dropped_and_suspend_left_as_it_was() {
        let mut job = mirror(Some("team-a"));
        assert!(!queue_on_worker(&mut job, None));
        assert_eq!(queue_of(&job), None);
        assert_eq!(job.spec.as_ref().unwrap().suspend, Some(false));
        let mut unqueued = mirror(None);
        assert!(!queue_on_worker(&mut unqueued, Some(&worker(&[]))));
        assert_eq!(unqueued.spec.as_ref().unwrap().suspend, Some(false));
        assert_eq!(unqueued.metadata.labels.as_ref().unwrap()["team"], "a");
    }

    #[test]
    fn admitted_once_the_workers_kueue_unsuspended_it_suspended_while_it_waits_or_once_evicted() {
        for phase in [MirrorPhase::Unspecified, MirrorPhase::Deleting] {
            assert_eq!(queued_mirror(phase), QueuedMirror::NotHeld, "{phase:?}");
        }
        assert_eq!(
            queued_mirror(MirrorPhase::Suspended),
            QueuedMirror::Suspended
        );
        for phase in [
            MirrorPhase::Pending,
            MirrorPhase::Running,
            MirrorPhase::Succeeded,
            MirrorPhase::Failed,
        ] {
            assert_eq!(queued_mirror(phase), QueuedMirror::Admitted, "{phase:?}");
        }
    }
}
