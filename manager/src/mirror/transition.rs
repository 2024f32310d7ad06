//! How a mirror's [`State`] changes: one pure function over the state and
//! what happened, returning the next state, what to send the agent, and the
//! answer. Its cases are one table in `transition_tests.rs`.

use std::time::{Duration, Instant};

use jobrelay_proto::v1::MirrorPhase;

use super::{Apply, Cleanup, Held, LostMirror, Rejection, Sent, State, StatusText};

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
    /// The manager Job shows the loss.
    LossShown,
    /// A new session opened; the agent's inventory names the revision and
    /// phase it holds (`None`: nothing of this mirror).
    Reconnected { held: Option<(u64, MirrorPhase)> },
}

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
            now,
        } => reported(
            state,
            Held {
                revision,
                phase,
                status,
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
        Event::LossShown => noted(loss_shown(state)),
        Event::Reconnected { held } => noted(reconnected(state, held)),
    }
}

fn stay<A>(state: State, outcome: A) -> Transition<A> {
    Transition {
        state,
        send: None,
        outcome,
    }
}

fn noted(state: State) -> Transition {
    stay(state, Outcome::Noted)
}

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
    let (sent, held) = match state {
        State::Sending { sent, held }
        | State::Refused {
            sent: Some(sent),
            held,
            ..
        } => (Some(sent), held),
        State::Refused { held, .. } => (None, held),
        State::Held(held) => (None, Some(held)),
        _ => (None, None),
    };
    let in_place = held.as_ref().is_some_and(|h| h.revision >= revision)
        || sent.is_some_and(|s| (s.session, s.revision) == (session, revision));
    if in_place {
        let state = match (sent, held) {
            (Some(sent), held) => State::Sending { sent, held },
            (None, Some(held)) => State::Held(held),
            (None, None) => State::Unsent,
        };
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
            held,
        },
        send: Some(Send::ApplyMirror { revision }),
        outcome: Apply::Sent,
    }
}

/// Have the mirror gone.
pub fn cleanup(state: State, session: Option<u64>, now: Instant) -> Transition<Cleanup> {
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
            since, held, loss, ..
        } => (
            State::Deleting {
                session,
                since,
                held,
                loss,
            },
            false,
        ),
        State::Lost(loss) => (
            State::Deleting {
                session,
                since: now,
                held: None,
                loss: Some(loss),
            },
            true,
        ),
        other => (
            State::Deleting {
                session,
                since: now,
                held: other.held().cloned(),
                loss: None,
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
        } => (
            State::Deleting {
                session,
                since,
                held: Some(kept(held)),
                loss,
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

fn refused(state: State, rejection: Rejection) -> State {
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

fn lost(state: State, mirror_uid: String, observed: String) -> State {
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
            session,
            since,
            held,
            loss: Some(known),
        } if same(&known) => State::Deleting {
            session,
            since,
            held,
            loss: Some(known),
        },
        State::Deleting { session, since, .. } => State::Deleting {
            session,
            since,
            held: None,
            loss: Some(loss()),
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

fn loss_shown(state: State) -> State {
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
        } => State::Deleting {
            session,
            since,
            held,
            loss: loss.map(shown),
        },
        State::Gone { pods_deleted, loss } => State::Gone {
            pods_deleted,
            loss: loss.map(shown),
        },
        other => other,
    }
}

fn reconnected(state: State, inventory: Option<(u64, MirrorPhase)>) -> State {
    let status = state.status().cloned();
    let held = inventory.map(|(revision, phase)| Held {
        revision,
        phase,
        status,
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
            ..
        } => State::Deleting {
            session,
            since,
            held,
            loss,
        },
        other @ (State::Lost(_) | State::Gone { .. }) => other,
    }
}

#[cfg(test)]
#[path = "transition_tests.rs"]
mod tests;
