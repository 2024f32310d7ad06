//! How a mirror's [`State`] changes: one pure function over the state and
//! what happened, returning the next state, what to send the agent, and the
//! answer. Its cases are one table in `transition_tests.rs`.

use std::time::Instant;

use jobrelay_proto::v1::MirrorPhase;

use super::asked::{apply, cleanup};
use super::reports::{gone, held_pods, loss_shown, lost, reconnected, refused, reported};
use super::{Held, HeldPod, PodsSeen, Rejection, State, StatusText, Unschedulable};
use super::{Outcome, Transition, stay};

/// What happens to a mirror: asked of it by the Job's life, or reported
/// by its agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Have `revision` in place; `session` is the cluster's session now.
    Apply {
        revision: u64,
        session: Option<u64>,
        now: Instant,
    },
    /// Have the mirror gone.
    Cleanup { session: Option<u64>, now: Instant },
    /// The agent's MirrorStatus.
    Status {
        revision: u64,
        phase: MirrorPhase,
        status: Option<StatusText>,
        /// Its Pods that wait unschedulable; a status without replaces any.
        unschedulable: Option<Unschedulable>,
        /// Its Pods by phase and why; a status without replaces any.
        pods: Option<PodsSeen>,
        now: Instant,
    },
    /// The agent's ApplyRejected.
    Refused(Rejection),
    /// The agent's MirrorLost.
    Lost {
        mirror_uid: String,
        observed: String,
    },
    /// The agent's MirrorGone.
    Gone { pods_deleted: u32, now: Instant },
    /// The agent's PodsHeld: the Pods held Terminating on a node that is
    /// not Ready (none: no longer).
    PodsHeld(Vec<HeldPod>),
    /// The manager Job shows the loss.
    LossShown,
    /// A new session opened; the agent's inventory names the revision and
    /// phase it holds (`None`: nothing of this mirror).
    Reconnected { held: Option<(u64, MirrorPhase)> },
}

/// What follows `event` for a mirror in `state`.
pub fn transition(state: State, event: Event) -> Transition {
    match event {
        Event::Apply {
            revision,
            session,
            now,
        } => apply(state, revision, session, now).answering(Outcome::Apply),
        Event::Cleanup { session, now } => cleanup(state, session, now).answering(Outcome::Cleanup),
        Event::Status {
            revision,
            phase,
            status,
            unschedulable,
            pods,
            now,
        } => reported(
            state,
            Held {
                revision,
                phase,
                status,
                unschedulable,
                pods,
            },
            now,
        )
        .answering(Outcome::Reported),
        Event::Refused(rejection) => noted(refused(state, rejection)),
        Event::Lost {
            mirror_uid,
            observed,
        } => noted(lost(state, mirror_uid, observed)),
        Event::Gone { pods_deleted, now } => {
            gone(state, pods_deleted, now).answering(|after| Outcome::Gone { after })
        }
        Event::PodsHeld(pods) => noted(held_pods(state, pods)),
        Event::LossShown => noted(loss_shown(state)),
        Event::Reconnected { held } => noted(reconnected(state, held)),
    }
}

fn noted(state: State) -> Transition {
    stay(state, Outcome::Noted)
}

#[cfg(test)]
#[path = "transition_tests.rs"]
mod tests;
