//! A refusal that may clear moves on: a mirror its worker refuses for a
//! reason that can clear (its namespace missing there, a ResourceQuota
//! exceeded, a webhook's denial) is tried again by its agent, with backoff,
//! for the cluster's `refusedRetryTimeout`; refused that long, it is
//! withdrawn and the Job placed again, that cluster tried last. Until then
//! the refusal is shown, in words, on the Job and in the admission check's
//! message. A Job pinned to the cluster stays, and is tried there for ever.
//! Pure, like [`super::life`].

use std::time::{Duration, Instant};

use super::life::Step;
use super::plan::refusal_text;
use super::withdrawal::Withdrawal;
use crate::mirror::{Mirror, State};

/// Where a mirror stands with its worker's refusals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Refused {
    /// Not refused, or refused for good (the Job then fails).
    #[default]
    No,
    /// Refused for a reason that can clear: why, in words, and when to look
    /// again.
    Waiting { why: String, again: Duration },
    /// Refused for the timeout: the mirror moves, for this reason.
    TooLong(String),
}

/// Whether the mirror in `state` on `cluster` is refused for a reason that
/// can clear, and for how long; `movable`: the Job may go elsewhere (not
/// pinned), `timeout`: the cluster's `refusedRetryTimeout`.
pub fn refused(
    cluster: &str,
    state: &State,
    movable: bool,
    timeout: Duration,
    now: Instant,
) -> Refused {
    let State::Refused { rejection, .. } = state else {
        return Refused::No;
    };
    if rejection.reason.is_permanent() {
        return Refused::No;
    }
    let text = refusal_text(cluster, rejection);
    let waited = now.saturating_duration_since(rejection.since);
    if !movable {
        let why = format!("{text}; its agent tries again (the Job is pinned to cluster {cluster})");
        return Refused::Waiting {
            why,
            again: timeout,
        };
    }
    match timeout.checked_sub(waited).filter(|left| !left.is_zero()) {
        Some(left) => Refused::Waiting {
            why: format!(
                "{text}; its agent tries again, and the Job is placed on another cluster if it is still refused after the cluster's refusedRetryTimeout ({}s)",
                timeout.as_secs()
            ),
            again: left,
        },
        None => Refused::TooLong(format!(
            "{text}, for {}s (its refusedRetryTimeout is {}s); the Job is placed again, cluster {cluster} tried last",
            waited.as_secs(),
            timeout.as_secs()
        )),
    }
}

/// A Job whose mirror its cluster refused too long has it withdrawn; one
/// refused for less is looked at again when the timeout runs out (the
/// second value). Only a Job being applied on its cluster moves. A move
/// once begun (`under_way`) goes on until the Job is unplaced: the mirror
/// being deleted no longer says it was refused.
pub fn moved_when_refused(
    step: Step,
    mirror: Option<&Mirror>,
    movable: bool,
    timeout: Duration,
    under_way: Option<Withdrawal>,
    now: Instant,
) -> (Step, Option<Duration>) {
    let Step::Apply { cluster } = step else {
        return (step, None);
    };
    if let Some(withdrawal) = under_way.filter(|w| w.refused) {
        return (Step::withdraw(cluster, withdrawal), None);
    }
    let state = mirror.map(|m| &m.state);
    match state.map(|state| refused(&cluster, state, movable, timeout, now)) {
        None | Some(Refused::No) => (Step::Apply { cluster }, None),
        Some(Refused::Waiting { again, .. }) => (Step::Apply { cluster }, Some(again)),
        Some(Refused::TooLong(why)) => {
            let refused = Withdrawal {
                why,
                refused: true,
                ..Withdrawal::default()
            };
            (Step::withdraw(cluster, refused), None)
        }
    }
}

#[cfg(test)]
#[path = "refused_tests.rs"]
mod tests;
