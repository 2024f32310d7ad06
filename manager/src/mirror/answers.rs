//! What a mirror's life answers and keeps: the answers to "have it in
//! place" and "have it gone", a worker's refusal, a loss, and the copied
//! status as the manager keeps it. Plain data.

use jobrelay_proto::v1::RejectReason;
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A refusal of the worker, as the agent reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub revision: u64,
    pub reason: RejectReason,
    pub message: String,
    /// When the agent tries again (transient reasons only).
    pub retry_in: Option<std::time::Duration>,
}

/// A mirror lost behind jobrelay's back, as the agent reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostMirror {
    /// The lost worker Job's UID; empty when the agent could not tell.
    pub mirror_uid: String,
    pub observed: String,
    /// The manager Job already shows this loss.
    pub accounted: bool,
}

/// What became of a request to have a mirror in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Apply {
    /// ApplyMirror sent now.
    Sent,
    /// Sent before, or the worker already holds this revision.
    InPlace,
    /// The worker refused this revision for good.
    Rejected(Rejection),
    /// The worker refused this revision for a reason that can clear; its
    /// agent tries again by itself.
    Waiting(Rejection),
    /// An earlier deletion of the mirror (or what is left of a lost one) is
    /// not confirmed yet.
    AwaitingGone,
    /// The cluster has no session now.
    Disconnected,
}

/// What became of a request to have a mirror gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleanup {
    /// The agent confirmed the Job and every Pod gone.
    Gone {
        pods_deleted: u32,
    },
    /// DeleteMirror sent now; `first` is false on a resend after reconnect.
    Started {
        first: bool,
    },
    /// Sent in this session; waiting for MirrorGone.
    Waiting,
    Disconnected,
}

/// A copied status as the manager keeps it between a report and its write:
/// its JSON text. The manager holds one per mirror, and the text takes a
/// tenth of the memory of the parsed tree (a few hundred bytes for a
/// finished Job's, where the tree's maps take several kilobytes). Shared,
/// so a copy of a mirror's state (each look at it) copies no text. The
/// kind's reader reads it back as its typed status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusText(Arc<str>);

impl StatusText {
    pub fn new(copied: &impl Serialize) -> Self {
        let text = serde_json::to_string(copied).expect("a copied status is plain JSON");
        StatusText(Arc::from(text))
    }

    /// The copied status again, as the kind `S` of the mirror that sent it
    /// (`None` if it was another kind's).
    pub fn read<S: DeserializeOwned>(&self) -> Option<S> {
        serde_json::from_str(&self.0).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::JobStatus;

    #[test]
    fn a_kept_status_reads_back_as_written() {
        let status: JobStatus = serde_json::from_value(serde_json::json!({
            "active": 1,
            "conditions": [{"type": "Complete", "status": "True"}],
        }))
        .unwrap();
        let kept = StatusText::new(&status);
        assert_eq!(kept.read::<JobStatus>(), Some(status));
    }
}
