//! What the manager knows of a Job's mirror on its worker, read from the
//! manager Job alone: the cluster jobrelay recorded, the remote-cleanup
//! finalizer (held until the worker reported the mirror and its Pods
//! gone), a refusal the agent retries, and the status copied back.

use jobrelay_proto::wire::{CLUSTER_KEY, DEACTIVATED_ANNOTATION, DISPATCH_WAITING_ANNOTATION};
use k8s_openapi::api::batch::v1::Job;
use serde::Serialize;

use super::job::{self, Phase};

/// Where the mirror stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MirrorState {
    /// No cluster recorded: the Job waits on the manager for a worker
    /// (room, a connected cluster, Kueue's admission).
    Unplaced,
    /// A cluster is recorded, and its worker refused the mirror for a
    /// reason that can clear; its agent tries again.
    Refused,
    /// Sent to its cluster; nothing reported running yet.
    Sent,
    /// Kept suspended on its cluster, without Pods.
    Suspended,
    /// Its Pods run (or ran) on the worker.
    Running,
    /// The Job finished; the mirror stays on the worker (for its logs,
    /// `remoteAfterFinished`) until jobrelay removes it.
    Finished,
    /// The manager Job is being deleted; the mirror and its Pods go first.
    Removing,
    /// The worker reported the mirror and every Pod of it gone; the
    /// finalizer is released.
    Gone,
    /// Its pinned cluster was Lost: jobrelay does not dispatch it again.
    Deactivated,
    /// Finished or deleted without ever being placed.
    None,
}

impl MirrorState {
    /// The state as the MIRROR column shows it.
    pub fn label(self) -> &'static str {
        match self {
            MirrorState::Unplaced => "unplaced",
            MirrorState::Refused => "refused, retrying",
            MirrorState::Sent => "sent",
            MirrorState::Suspended => "suspended",
            MirrorState::Running => "running",
            MirrorState::Finished => "finished, kept",
            MirrorState::Removing => "removing",
            MirrorState::Gone => "gone",
            MirrorState::Deactivated => "deactivated",
            MirrorState::None => "-",
        }
    }
}

/// The cluster jobrelay recorded for the Job's mirror.
pub fn cluster(job: &Job) -> Option<&str> {
    job::annotation(job, CLUSTER_KEY)
}

/// Where the Job's mirror stands, as far as the manager Job shows it.
pub fn state(job: &Job) -> MirrorState {
    let status = job::status(job);
    let held = job::has_finalizer(job);
    let ended = status.deleting || matches!(status.phase, Phase::Complete | Phase::Failed);
    if job::annotation(job, DEACTIVATED_ANNOTATION).is_some() && !held {
        return MirrorState::Deactivated;
    }
    if cluster(job).is_none() {
        return match (ended, held) {
            (false, _) => MirrorState::Unplaced,
            (true, true) => MirrorState::Removing,
            (true, false) => MirrorState::None,
        };
    }
    if ended {
        return match (held, status.deleting) {
            (false, _) => MirrorState::Gone,
            (true, true) => MirrorState::Removing,
            (true, false) => MirrorState::Finished,
        };
    }
    if job::annotation(job, DISPATCH_WAITING_ANNOTATION).is_some() {
        return MirrorState::Refused;
    }
    match status.phase {
        Phase::Suspended => MirrorState::Suspended,
        Phase::Pending => MirrorState::Sent,
        _ => MirrorState::Running,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::job::tests::job;
    use jobrelay_proto::wire::REMOTE_CLEANUP_FINALIZER;
    use serde_json::{Value, json};

    const RUNNING: &str = r#"{"status": {"startTime": "2026-11-28T11:56:00Z", "active": 1}}"#;
    const NOT_STARTED: &str = "{}";
    const SUSPENDED: &str = r#"{"spec": {"suspend": true}}"#;
    const COMPLETE: &str =
        r#"{"status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}}"#;
    const DELETING: &str = r#"{"metadata": {"deletionTimestamp": "2026-11-28T12:00:00Z"}}"#;

    /// A Job with the cluster recorded or not, the finalizer held or not,
    /// a refusal waiting or not, and its own spec, status and metadata.
    fn case(cluster: bool, held: bool, waiting: bool, deactivated: bool, rest: &str) -> Job {
        let mut annotations = serde_json::Map::new();
        if cluster {
            annotations.insert(CLUSTER_KEY.into(), "worker-1".into());
        }
        if waiting {
            let refusal =
                "cluster worker-1 refused the Job (NAMESPACE_MISSING): namespaces \"ml\" not found";
            annotations.insert(DISPATCH_WAITING_ANNOTATION.into(), refusal.into());
        }
        if deactivated {
            annotations.insert(DEACTIVATED_ANNOTATION.into(), "2026-11-28T11:59:00Z".into());
        }
        let finalizers: Vec<&str> = match held {
            true => vec![REMOTE_CLEANUP_FINALIZER],
            false => vec![],
        };
        let mut extra: Value = serde_json::from_str(rest).expect("JSON");
        extra["metadata"]["annotations"] = Value::Object(annotations);
        extra["metadata"]["finalizers"] = json!(finalizers);
        job("train", extra)
    }

    #[test]
    fn the_mirror_state_from_what_the_manager_job_shows() {
        use MirrorState::*;
        // cluster, finalizer held, refusal waiting, deactivated, the Job's own fields: state
        let cases = [
            (false, false, false, false, NOT_STARTED, Unplaced),
            (false, false, false, false, SUSPENDED, Unplaced),
            (true, true, false, false, NOT_STARTED, Sent),
            (true, true, true, false, NOT_STARTED, Refused),
            (true, true, false, false, SUSPENDED, Suspended),
            (true, true, false, false, RUNNING, Running),
            (true, true, false, false, COMPLETE, Finished),
            (true, false, false, false, COMPLETE, Gone),
            (true, true, true, false, COMPLETE, Finished),
            (true, true, false, false, DELETING, Removing),
            (true, false, false, false, DELETING, Gone),
            (false, true, false, false, DELETING, Removing),
            (false, false, false, false, COMPLETE, None),
            (false, false, false, true, NOT_STARTED, Deactivated),
            (true, true, false, true, RUNNING, Running),
        ];
        for (cluster, held, waiting, deactivated, rest, expected) in cases {
            let job = case(cluster, held, waiting, deactivated, rest);
            assert_eq!(
                state(&job),
                expected,
                "cluster {cluster}, held {held}, waiting {waiting}, deactivated {deactivated}, {rest}"
            );
        }
    }

    #[test]
    fn the_cluster_is_jobrelays_record() {
        assert_eq!(
            cluster(&case(true, true, false, false, RUNNING)),
            Some("worker-1")
        );
        assert_eq!(
            cluster(&case(false, false, false, false, RUNNING)),
            Option::None
        );
    }
}
