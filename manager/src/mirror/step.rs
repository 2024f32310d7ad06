//! One step of a mirror's life as data: the next state, the message to
//! send its agent, and the answer.

use std::time::Duration;

use jobrelay_proto::v1::MirrorPhase;

use super::{Apply, Cleanup, State};

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
    pub(super) fn answering<B>(self, into: impl FnOnce(A) -> B) -> Transition<B> {
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

pub(super) fn stay<A>(state: State, outcome: A) -> Transition<A> {
    Transition {
        state,
        send: None,
        outcome,
    }
}
