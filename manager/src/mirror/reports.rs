//! What a mirror's agent reports, and a new session's inventory, taken
//! into its state.

use std::time::{Duration, Instant};

use jobrelay_proto::v1::MirrorPhase;

use super::{Reported, Transition, stay};
use crate::mirror::{Held, HeldPod, LostMirror, Rejection, Sent, State};

/// Take in a status of what the worker holds.
pub fn reported(state: State, new: Held, now: Instant) -> Transition<Reported> {
    let previous = state.phase();
    let changed_from = (previous != new.phase).then_some(previous);
    let kept = |held: Option<Held>| Held {
        status: new.status.clone().or(held.and_then(|h| h.status)),
        ..new.clone()
    };
    let waited = |sent: &Sent| sent.since.map(|since| now.saturating_duration_since(since));
    let (state, answered_after) = match state {
        State::Lost(_) | State::Gone { .. } => {
            // What is lost or gone says nothing more.
            let outcome = Reported {
                changed_from: None,
                answered_after: None,
            };
            return stay(state, outcome);
        }
        State::Unsent => (State::Held(kept(None)), None),
        State::Held(held) => (State::Held(kept(Some(held))), None),
        State::Sending { sent, held }
        | State::Refused {
            sent: Some(sent),
            held,
            ..
        } => {
            let held = kept(held);
            let after = waited(&sent);
            if held.revision >= sent.revision {
                (State::Held(held), after)
            } else {
                let sent = Sent {
                    since: None,
                    ..sent
                };
                (
                    State::Sending {
                        sent,
                        held: Some(held),
                    },
                    after,
                )
            }
        }
        State::Refused { held, .. } => (State::Held(kept(held)), None),
        State::Deleting {
            session,
            since,
            held,
            loss,
            pods_held,
        } => (
            State::Deleting {
                session,
                since,
                held: Some(kept(held)),
                loss,
                pods_held,
            },
            None,
        ),
    };
    let outcome = Reported {
        changed_from,
        answered_after,
    };
    stay(state, outcome)
}

pub(super) fn refused(state: State, mut rejection: Rejection) -> State {
    // Refused again: since the first refusal in a row.
    if let State::Refused {
        rejection: before, ..
    } = &state
    {
        rejection.since = rejection.since.min(before.since);
    }
    match state {
        State::Unsent => State::Refused {
            rejection,
            sent: None,
            held: None,
        },
        State::Sending { sent, held } => State::Refused {
            rejection,
            sent: Some(sent),
            held,
        },
        State::Held(held) => State::Refused {
            rejection,
            sent: None,
            held: Some(held),
        },
        State::Refused { sent, held, .. } => State::Refused {
            rejection,
            sent,
            held,
        },
        // A refusal of an apply outrun by a deletion or a loss changes nothing.
        other @ (State::Deleting { .. } | State::Lost(_) | State::Gone { .. }) => other,
    }
}

pub(super) fn lost(state: State, mirror_uid: String, observed: String) -> State {
    let same = |loss: &LostMirror| loss.mirror_uid == mirror_uid;
    let loss = || LostMirror {
        mirror_uid: mirror_uid.clone(),
        observed: observed.clone(),
        accounted: false,
    };
    match state {
        // Already confirmed gone; nothing is left to wait for.
        state @ State::Gone { .. } => state,
        State::Lost(known) if same(&known) => State::Lost(known),
        State::Deleting {
            loss: Some(known),
            session,
            since,
            held,
            pods_held,
        } if same(&known) => State::Deleting {
            session,
            since,
            held,
            loss: Some(known),
            pods_held,
        },
        State::Deleting {
            session,
            since,
            pods_held,
            ..
        } => State::Deleting {
            session,
            since,
            held: None,
            loss: Some(loss()),
            pods_held,
        },
        _ => State::Lost(loss()),
    }
}

/// Take in the mirror confirmed gone; answers how long since the first
/// DeleteMirror, if one was sent.
pub fn gone(state: State, pods_deleted: u32, now: Instant) -> Transition<Option<Duration>> {
    let (loss, after) = match state {
        State::Deleting { since, loss, .. } => (loss, Some(now.saturating_duration_since(since))),
        State::Lost(loss) => (Some(loss), None),
        State::Gone { loss, .. } => (loss, None),
        _ => (None, None),
    };
    stay(State::Gone { pods_deleted, loss }, after)
}

pub(super) fn loss_shown(state: State) -> State {
    let shown = |mut loss: LostMirror| {
        loss.accounted = true;
        loss
    };
    match state {
        State::Lost(loss) => State::Lost(shown(loss)),
        State::Deleting {
            session,
            since,
            held,
            loss,
            pods_held,
        } => State::Deleting {
            session,
            since,
            held,
            loss: loss.map(shown),
            pods_held,
        },
        State::Gone { pods_deleted, loss } => State::Gone {
            pods_deleted,
            loss: loss.map(shown),
        },
        other => other,
    }
}

pub(super) fn reconnected(state: State, inventory: Option<(u64, MirrorPhase)>) -> State {
    let status = state.status().cloned();
    let unschedulable = state.held().and_then(|h| h.unschedulable.clone());
    let pods = state.held().and_then(|h| h.pods.clone());
    let held = inventory.map(|(revision, phase)| Held {
        revision,
        phase,
        status,
        unschedulable,
        pods,
    });
    match state {
        State::Unsent | State::Held(_) => held.map_or(State::Unsent, State::Held),
        State::Sending { sent, .. } => match held {
            Some(held) if held.revision >= sent.revision => State::Held(held),
            held => State::Sending { sent, held },
        },
        State::Refused {
            rejection, sent, ..
        } => State::Refused {
            rejection,
            sent,
            held,
        },
        State::Deleting {
            session,
            since,
            loss,
            pods_held,
            ..
        } => State::Deleting {
            session,
            since,
            held,
            loss,
            pods_held,
        },
        other @ (State::Lost(_) | State::Gone { .. }) => other,
    }
}

/// Take in the Pods held Terminating on a node that is not Ready: kept
/// while the mirror is being deleted, what its deletion waits for.
pub(super) fn held_pods(state: State, pods: Vec<HeldPod>) -> State {
    match state {
        State::Deleting {
            session,
            since,
            held,
            loss,
            ..
        } => State::Deleting {
            session,
            since,
            held,
            loss,
            pods_held: pods,
        },
        other => other,
    }
}
