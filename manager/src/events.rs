//! Kubernetes Events on manager Jobs, one reason per step of a mirror's life.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// The steps a user sees in `kubectl describe job`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Dispatched,
    RemoteFinished,
    RemoteCleanupStarted,
    RemotePodsGone,
    /// The worker refused the Job for good; it fails.
    RemoteRejected,
    /// The worker refused the Job for a reason that can clear; its agent
    /// tries again.
    DispatchWaiting,
    /// The mirror was removed behind jobrelay's back.
    RemoteJobLost,
    ClusterLost,
    /// No registered cluster can take the Job as it is pinned.
    Unplaceable,
    /// A mirror queued in its worker's own Kueue was removed, Pods first
    /// (the manager's Kueue evicted the Job, or the worker's did not admit
    /// it in time); the Job is placed again when Kueue admits it.
    MirrorWithdrawn,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Dispatched => "Dispatched",
            Reason::RemoteFinished => "RemoteFinished",
            Reason::RemoteCleanupStarted => "RemoteCleanupStarted",
            Reason::RemotePodsGone => "RemotePodsGone",
            Reason::RemoteRejected => "RemoteRejected",
            Reason::DispatchWaiting => "DispatchWaiting",
            Reason::RemoteJobLost => "RemoteJobLost",
            Reason::ClusterLost => "ClusterLost",
            Reason::Unplaceable => "Unplaceable",
            Reason::MirrorWithdrawn => "MirrorWithdrawn",
        }
    }

    fn event_type(self) -> EventType {
        match self {
            Reason::RemoteRejected
            | Reason::DispatchWaiting
            | Reason::RemoteJobLost
            | Reason::ClusterLost
            | Reason::Unplaceable => EventType::Warning,
            _ => EventType::Normal,
        }
    }
}

/// Publishes Events as `jobrelay-manager`.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl Events {
    pub fn new(client: kube::Client, instance: &str) -> Self {
        let reporter = Reporter {
            controller: "jobrelay-manager".into(),
            instance: Some(instance.into()),
        };
        Events {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Records `reason` on the Job; a failure to record is logged, never fatal.
    pub async fn publish(&self, job: &ObjectReference, reason: Reason, note: String) {
        let event = Event {
            type_: reason.event_type(),
            reason: reason.as_str().into(),
            note: Some(note),
            action: reason.as_str().into(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, job).await {
            tracing::warn!(%error, reason = reason.as_str(), job = ?job.name, "could not record Event");
        }
    }
}

/// A reference to a manager Job from its key and UID.
pub fn job_reference(namespace: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        uid: Some(uid.into()),
        ..Default::default()
    }
}
