//! What the Job's life asks of a mirror: have a revision in place, have it
//! gone.

use std::time::Instant;

use jobrelay_proto::v1::RejectReason;

use super::{Send, Transition, stay};
use crate::mirror::{Apply, Cleanup, Sent, State};

/// Have `revision` in place.
pub fn apply(state: State, revision: u64, session: Option<u64>, now: Instant) -> Transition<Apply> {
    let state = match state {
        // Deleted before (a suspension): this is a new mirror.
        State::Gone { .. } => State::Unsent,
        state => state,
    };
    let answer = match &state {
        State::Deleting { .. } | State::Lost(_) => Some(Apply::AwaitingGone),
        State::Refused { rejection, .. } if rejection.revision == revision => {
            Some(if rejection.reason.is_permanent() {
                Apply::Rejected(rejection.clone())
            } else {
                Apply::Waiting(rejection.clone())
            })
        }
        _ => None,
    };
    if let Some(answer) = answer {
        return stay(state, answer);
    }
    let Some(session) = session else {
        return stay(state, Apply::Disconnected);
    };
    let sent = state.sent();
    let in_place = state.held().is_some_and(|h| h.revision >= revision)
        || sent.is_some_and(|s| (s.session, s.revision) == (session, revision));
    if in_place {
        return stay(state, Apply::InPlace);
    }
    let since = sent.and_then(|s| s.since).unwrap_or(now);
    Transition {
        state: State::Sending {
            sent: Sent {
                session,
                revision,
                since: Some(since),
            },
            held: state.into_held(),
        },
        send: Some(Send::ApplyMirror { revision }),
        outcome: Apply::Sent,
    }
}

/// Have the mirror gone. One the worker refused for its namespace (its
/// agent's policy does not open it) and never showed holding was never
/// written there: it is gone at once, even disconnected — the agent may not
/// even read that namespace, and nothing could confirm it otherwise.
pub fn cleanup(state: State, session: Option<u64>, now: Instant) -> Transition<Cleanup> {
    if let State::Refused {
        rejection,
        held: None,
        ..
    } = &state
        && rejection.reason == RejectReason::NamespaceNotAllowed
    {
        let gone = State::Gone {
            pods_deleted: 0,
            loss: None,
        };
        return stay(gone, Cleanup::Gone { pods_deleted: 0 });
    }
    let session = match (&state, session) {
        (State::Gone { pods_deleted, .. }, _) => {
            let pods_deleted = *pods_deleted;
            return stay(state, Cleanup::Gone { pods_deleted });
        }
        (_, None) => return stay(state, Cleanup::Disconnected),
        (State::Deleting { session: sent, .. }, Some(current)) if *sent == current => {
            return stay(state, Cleanup::Waiting);
        }
        (_, Some(session)) => session,
    };
    let (state, first) = match state {
        State::Deleting {
            since,
            held,
            loss,
            pods_held,
            ..
        } => (
            State::Deleting {
                session,
                since,
                held,
                loss,
                pods_held,
            },
            false,
        ),
        State::Lost(loss) => (
            State::Deleting {
                session,
                since: now,
                held: None,
                loss: Some(loss),
                pods_held: Vec::new(),
            },
            true,
        ),
        other => (
            State::Deleting {
                session,
                since: now,
                held: other.held().cloned(),
                loss: None,
                pods_held: Vec::new(),
            },
            true,
        ),
    };
    Transition {
        state,
        send: Some(Send::DeleteMirror),
        outcome: Cleanup::Started { first },
    }
}
