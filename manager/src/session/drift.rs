//! Anti-entropy: whether an agent's desired set has drifted from what the
//! manager wants on its cluster. Each agent Heartbeat says what the agent
//! holds as wanted ([`Holding`]: a count and a digest, after how many
//! set-changing messages); the manager compares it with its own summary of
//! the mirrors it wants there, but only when nothing is in flight (the agent
//! took every DesiredSet, apply and delete queued for it). A difference
//! seen on two comparable Heartbeats in a row, with the same two summaries,
//! is a divergence no message would mend: the session's DesiredSet is sent
//! again, at most once per [`Drift`]'s spacing, so a skew that comes back
//! cannot loop. A one-off difference (a retention that ran out between the
//! manager's scan and its DeleteMirror) resyncs nothing.

use std::time::{Duration, Instant};

use jobrelay_proto::holding::Summary;
use jobrelay_proto::v1::Holding;

/// What the agent holds and what the manager wants, when they differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mismatch {
    pub held: Summary,
    pub wanted: Summary,
}

/// What one session remembers between Heartbeats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Drift {
    /// The difference the last comparable Heartbeat showed, if any.
    previous: Option<Mismatch>,
    /// When this session's DesiredSet was last sent again.
    last_resync: Option<Instant>,
}

/// What a Heartbeat's [`Holding`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DriftVerdict {
    /// Messages are in flight (or the agent took more than were sent, which
    /// a new DesiredSet ends): nothing to compare.
    InFlight,
    /// The agent holds what the manager wants.
    InStep,
    /// They differ, for the first time or otherwise than last time: wait
    /// for the next Heartbeat.
    Differs(Mismatch),
    /// They differ as last time, but a DesiredSet was sent again less than
    /// the spacing ago.
    Spaced(Mismatch),
    /// They differ as last time: send the DesiredSet again.
    OutOfStep(Mismatch),
}

/// Judges one Heartbeat's `holding` against `wanted` (what the manager wants
/// on the cluster), after `sent` set-changing messages were queued for the
/// agent, at `now`; a DesiredSet is sent again at most once per `spacing`.
/// Returns what to remember for the next Heartbeat and what to do.
pub(super) fn compare(
    drift: Drift,
    sent: u64,
    holding: &Holding,
    wanted: Summary,
    now: Instant,
    spacing: Duration,
) -> (Drift, DriftVerdict) {
    if holding.received != sent {
        return (drift, DriftVerdict::InFlight);
    }
    let held = Summary::from(holding);
    if held == wanted {
        let drift = Drift {
            previous: None,
            ..drift
        };
        return (drift, DriftVerdict::InStep);
    }
    let mismatch = Mismatch { held, wanted };
    if drift.previous != Some(mismatch) {
        let drift = Drift {
            previous: Some(mismatch),
            ..drift
        };
        return (drift, DriftVerdict::Differs(mismatch));
    }
    let spaced = drift
        .last_resync
        .is_some_and(|at| now.saturating_duration_since(at) < spacing);
    if spaced {
        return (drift, DriftVerdict::Spaced(mismatch));
    }
    let drift = Drift {
        previous: None,
        last_resync: Some(now),
    };
    (drift, DriftVerdict::OutOfStep(mismatch))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPACING: Duration = Duration::from_secs(50);

    fn t(seconds: u64) -> Instant {
        static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *ORIGIN.get_or_init(Instant::now) + Duration::from_secs(seconds)
    }

    fn summary(uids: &[&str]) -> Summary {
        Summary::of(uids.iter().copied())
    }

    fn holding(received: u64, uids: &[&str]) -> Holding {
        summary(uids).holding(received)
    }

    fn mismatch(held: &[&str], wanted: &[&str]) -> Mismatch {
        Mismatch {
            held: summary(held),
            wanted: summary(wanted),
        }
    }

    fn drift(previous: Option<Mismatch>, last_resync: Option<u64>) -> Drift {
        Drift {
            previous,
            last_resync: last_resync.map(t),
        }
    }

    struct Case {
        what: &'static str,
        drift: Drift,
        sent: u64,
        holding: Holding,
        wanted: &'static [&'static str],
        now: u64,
        then: Drift,
        verdict: DriftVerdict,
    }

    #[rustfmt::skip]
    fn cases() -> Vec<Case> {
        let ab = mismatch(&["a", "b"], &["a"]);
        let abc = mismatch(&["a", "b", "c"], &["a"]);
        let row = |what, drift, sent, holding, wanted, now, then, verdict| Case { what, drift, sent, holding, wanted, now, then, verdict };
        vec![
            row("messages in flight: not compared, nothing forgotten", drift(Some(ab), None), 5, holding(4, &["a", "b"]), &["a"], 100, drift(Some(ab), None), DriftVerdict::InFlight),
            row("the agent took more than was sent: not compared", drift(None, None), 3, holding(4, &["a"]), &["a"], 100, drift(None, None), DriftVerdict::InFlight),
            row("in step", drift(None, None), 4, holding(4, &["a"]), &["a"], 100, drift(None, None), DriftVerdict::InStep),
            row("in step again: the difference before is forgotten", drift(Some(ab), Some(10)), 4, holding(4, &["a"]), &["a"], 100, drift(None, Some(10)), DriftVerdict::InStep),
            row("a first difference: remembered, nothing sent", drift(None, None), 4, holding(4, &["a", "b"]), &["a"], 100, drift(Some(ab), None), DriftVerdict::Differs(ab)),
            row("another difference than last time: remembered instead", drift(Some(abc), None), 4, holding(4, &["a", "b"]), &["a"], 100, drift(Some(ab), None), DriftVerdict::Differs(ab)),
            row("the same difference twice: out of step", drift(Some(ab), None), 4, holding(4, &["a", "b"]), &["a"], 100, drift(None, Some(100)), DriftVerdict::OutOfStep(ab)),
            row("twice, a resync within the spacing: held back", drift(Some(ab), Some(60)), 4, holding(4, &["a", "b"]), &["a"], 100, drift(Some(ab), Some(60)), DriftVerdict::Spaced(ab)),
            row("twice, the last resync a spacing ago: out of step", drift(Some(ab), Some(50)), 4, holding(4, &["a", "b"]), &["a"], 100, drift(None, Some(100)), DriftVerdict::OutOfStep(ab)),
            row("the same counts, other UIDs: a difference", drift(None, None), 4, holding(4, &["b"]), &["a"], 100, drift(Some(mismatch(&["b"], &["a"])), None), DriftVerdict::Differs(mismatch(&["b"], &["a"]))),
        ]
    }

    #[test]
    fn every_comparison_of_a_heartbeat() {
        for case in cases() {
            let wanted = summary(case.wanted);
            let (then, verdict) = compare(
                case.drift,
                case.sent,
                &case.holding,
                wanted,
                t(case.now),
                SPACING,
            );
            assert_eq!((then, verdict), (case.then, case.verdict), "{}", case.what);
        }
    }

    #[test]
    fn a_skew_that_comes_back_resyncs_once_per_spacing() {
        let (held, wanted) = (holding(1, &["a", "b"]), summary(&["a"]));
        let mut state = Drift::default();
        let mut resyncs = Vec::new();
        for beat in 0..30 {
            let now = 5 * beat;
            let verdict;
            (state, verdict) = compare(state, 1, &held, wanted, t(now), SPACING);
            if matches!(verdict, DriftVerdict::OutOfStep(_)) {
                resyncs.push(now);
            }
        }
        assert_eq!(resyncs, [5, 55, 105]);
    }
}
