//! What the fleet answers about one mirror: its view of it, and what asking
//! it to apply or clean up the mirror came to. Plain data, read by the
//! Job's life.

use std::time::Instant;

use jobrelay_proto::v1::{MirrorPhase, RejectReason};

use crate::job::status::StatusText;
use crate::kinds::key::Key;

/// What the manager sent and heard about one mirror on one cluster.
#[derive(Debug, Clone, Default)]
pub struct MirrorView {
    pub key: Option<Key>,
    /// The revision the worker reported holding; `None` when it holds none.
    pub held_revision: Option<u64>,
    /// (session, revision) of the last ApplyMirror sent.
    pub apply_sent: Option<(u64, u64)>,
    /// When an apply was sent that the worker has not reported holding yet.
    pub awaiting_held_since: Option<Instant>,
    /// Session in which the last DeleteMirror was sent.
    pub delete_sent: Option<u64>,
    /// When the first DeleteMirror was sent.
    pub delete_sent_at: Option<Instant>,
    /// Set by MirrorGone: the mirror and its Pods are gone (with the count of
    /// Pods the agent had to delete itself).
    pub gone: Option<u32>,
    pub phase: MirrorPhase,
    /// The copied part of the worker's latest JobStatus.
    pub status: Option<StatusText>,
    /// The last ApplyRejected, until the worker holds the mirror.
    pub rejected: Option<Rejection>,
    /// Set by MirrorLost: the mirror was removed behind jobrelay's back; the
    /// agent is deleting what is left of it.
    pub lost: Option<LostMirror>,
}

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

/// A refusal of revision 1, for tests.
#[cfg(test)]
pub(crate) fn rejection(reason: RejectReason) -> Rejection {
    Rejection {
        revision: 1,
        reason,
        message: "no".into(),
        retry_in: None,
    }
}
