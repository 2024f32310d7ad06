//! The manager's side of one mirror: a [`Mirror`] is the manager Job it
//! belongs to and the one [`State`] its life is in on its cluster — what the
//! manager sent there and what the agent reported. Every change goes
//! through [`transition`], a pure function from a state and an [`Event`] to
//! the next state, the message to send (if any) and the answer for whoever
//! asked. The fleet keeps the states and carries out the sends; the Job's
//! life reads a state and decides.
//!
//! Beside the state, plain data too: what its life answers (to "have it in
//! place", "have it gone"), a worker's refusal, a loss, and the copied
//! status as the manager keeps it. Nothing here talks to an API server or a
//! session.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jobrelay_proto::v1::{MirrorPhase, RejectReason};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::kinds::Key;

mod asked;
mod pods;
mod reports;
mod transition;

pub use asked::{apply, cleanup};
pub use pods::{PodWhy, PodsSeen};
pub use reports::{gone, reported};
pub use transition::{Event, transition};

/// A mirror the manager wants on one cluster, or is cleaning up there.
#[derive(Debug, Clone, PartialEq)]
pub struct Mirror {
    /// The manager Job it mirrors.
    pub key: Key,
    pub state: State,
}

/// Where one mirror's life stands on its cluster. Each state holds only
/// what is true in it: a mirror being deleted has no apply under way, a
/// gone one holds nothing, a refused one keeps what was sent and held for
/// the revisions it did not refuse.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// Placed on the cluster: nothing sent, nothing held.
    Unsent,
    /// An ApplyMirror went out that the worker has not shown holding; it
    /// may still hold an older revision.
    Sending { sent: Sent, held: Option<Held> },
    /// The worker holds the latest revision sent (or a newer one).
    Held(Held),
    /// The worker refused `rejection.revision`.
    Refused {
        rejection: Rejection,
        sent: Option<Sent>,
        held: Option<Held>,
    },
    /// A DeleteMirror went out in `session`; the worker may still report
    /// the mirror until its MirrorGone.
    Deleting {
        session: u64,
        since: Instant,
        held: Option<Held>,
        /// A loss reported before the deletion began.
        loss: Option<LostMirror>,
        /// Its Pods held Terminating on a node that is not Ready, as the
        /// agent last reported them: what keeps the deletion from ending.
        pods_held: Vec<HeldPod>,
    },
    /// The mirror was removed behind jobrelay's back; the agent deletes
    /// what is left of it.
    Lost(LostMirror),
    /// The mirror and every Pod of it are gone (with the count of Pods the
    /// agent had to delete itself).
    Gone {
        pods_deleted: u32,
        loss: Option<LostMirror>,
    },
}

/// An ApplyMirror that went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub session: u64,
    pub revision: u64,
    /// When the first apply went out that the worker has not reported
    /// anything about since; `None` once it has.
    pub since: Option<Instant>,
}

/// What the worker reported holding.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub revision: u64,
    pub phase: MirrorPhase,
    /// The copied part of the worker's latest status.
    pub status: Option<StatusText>,
    /// The mirror's Pods the worker's scheduler finds no node for, as its
    /// latest status says; `None` while none waits so.
    pub unschedulable: Option<Unschedulable>,
    /// Its Pods by phase and why some wait or failed, as its latest status
    /// says; `None` from an agent that does not say.
    pub pods: Option<PodsSeen>,
}

/// A Pod of a mirror held Terminating on a node that is not Ready, as the
/// agent reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldPod {
    pub pod: String,
    pub node: String,
    /// How long its node has not been Ready.
    pub node_down_for: Duration,
}

/// Pods of a mirror that wait Pending and unschedulable on its worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unschedulable {
    pub pods: u32,
    /// Since when, on this manager's clock: the status's arrival less the
    /// wait the agent measured.
    pub since: Instant,
    /// The scheduler's message on one of them.
    pub message: String,
}

impl Held {
    /// What a status of `revision` in `phase` says, with nothing of its Pods.
    pub fn new(revision: u64, phase: MirrorPhase, status: Option<StatusText>) -> Self {
        Held {
            revision,
            phase,
            status,
            unschedulable: None,
            pods: None,
        }
    }
}

impl Mirror {
    /// A mirror of `key`, just placed.
    pub fn placed(key: Key) -> Self {
        Mirror {
            key,
            state: State::Unsent,
        }
    }
}

impl State {
    /// What the worker holds, if it reported holding a revision.
    pub fn held(&self) -> Option<&Held> {
        match self {
            State::Held(held) => Some(held),
            State::Sending { held, .. }
            | State::Refused { held, .. }
            | State::Deleting { held, .. } => held.as_ref(),
            State::Unsent | State::Lost(_) | State::Gone { .. } => None,
        }
    }

    /// What the worker holds, taken out of the state.
    pub fn into_held(self) -> Option<Held> {
        match self {
            State::Held(held) => Some(held),
            State::Sending { held, .. }
            | State::Refused { held, .. }
            | State::Deleting { held, .. } => held,
            State::Unsent | State::Lost(_) | State::Gone { .. } => None,
        }
    }

    /// The apply under way, if one went out.
    pub fn sent(&self) -> Option<Sent> {
        match self {
            State::Sending { sent, .. } => Some(*sent),
            State::Refused { sent, .. } => *sent,
            _ => None,
        }
    }

    /// The phase the worker last reported (`Deleting` once lost).
    pub fn phase(&self) -> MirrorPhase {
        match self {
            State::Lost(_) => MirrorPhase::Deleting,
            _ => self.held().map_or(MirrorPhase::Unspecified, |h| h.phase),
        }
    }

    /// The copied part of the worker's latest status, while it holds the mirror.
    pub fn status(&self) -> Option<&StatusText> {
        self.held()?.status.as_ref()
    }

    /// A loss the manager Job does not show yet.
    pub fn unshown_loss(&self) -> Option<&LostMirror> {
        self.loss().filter(|loss| !loss.accounted)
    }

    /// Whether the mirror was lost or is gone: nothing of it is worth
    /// waiting for.
    pub fn lost_or_gone(&self) -> bool {
        self.loss().is_some() || matches!(self, State::Gone { .. })
    }

    /// Since when an apply has gone unanswered, if one has.
    pub fn awaiting_held_since(&self) -> Option<Instant> {
        self.sent()?.since
    }

    /// The Pods that keep its deletion from ending, held Terminating on a
    /// node that is not Ready (none unless it is being deleted).
    pub fn pods_held(&self) -> &[HeldPod] {
        match self {
            State::Deleting { pods_held, .. } => pods_held,
            _ => &[],
        }
    }

    /// Whether the mirror is wanted in place: placed, not being deleted,
    /// lost or gone.
    pub fn wanted(&self) -> bool {
        matches!(
            self,
            State::Unsent | State::Sending { .. } | State::Held(_) | State::Refused { .. }
        )
    }

    /// Whether the mirror counts on its cluster: wanted and not confirmed gone.
    pub fn is_active(&self) -> bool {
        !matches!(self, State::Gone { .. })
    }

    fn loss(&self) -> Option<&LostMirror> {
        match self {
            State::Lost(loss) => Some(loss),
            State::Deleting { loss, .. } | State::Gone { loss, .. } => loss.as_ref(),
            _ => None,
        }
    }
}

// One step of a mirror's life as data: the next state, the message to
// send its agent, and the answer.

/// A message to send the mirror's agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Send {
    ApplyMirror { revision: u64 },
    DeleteMirror,
}

/// The answer to an [`Event`], for whoever asked or reports on it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Apply(Apply),
    Cleanup(Cleanup),
    Reported(Reported),
    /// MirrorGone taken in: how long since the first DeleteMirror, if one
    /// was sent.
    Gone {
        after: Option<Duration>,
    },
    /// Taken in; nothing to answer.
    Noted,
}

/// The next state, the message to send, the answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition<A = Outcome> {
    pub state: State,
    pub send: Option<Send>,
    pub outcome: A,
}

impl<A> Transition<A> {
    fn answering<B>(self, into: impl FnOnce(A) -> B) -> Transition<B> {
        Transition {
            state: self.state,
            send: self.send,
            outcome: into(self.outcome),
        }
    }
}

/// What a status taken in comes to: the phase it replaced, if it changed,
/// and how long an apply went unanswered before it, if one did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reported {
    pub changed_from: Option<MirrorPhase>,
    pub answered_after: Option<Duration>,
}

fn stay<A>(state: State, outcome: A) -> Transition<A> {
    Transition {
        state,
        send: None,
        outcome,
    }
}

/// A refusal of revision 1, for tests.
#[cfg(test)]
pub(crate) fn rejection(reason: jobrelay_proto::v1::RejectReason) -> Rejection {
    Rejection {
        revision: 1,
        reason,
        message: "no".into(),
        retry_in: None,
        since: Instant::now(),
    }
}

/// A refusal of the worker, as the agent reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub revision: u64,
    pub reason: RejectReason,
    pub message: String,
    /// When the agent tries again (transient reasons only).
    pub retry_in: Option<std::time::Duration>,
    /// Since when the worker has refused the mirror, on this manager's
    /// clock: the first of the refusals in a row.
    pub since: Instant,
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
#[path = "tests.rs"]
mod tests;
