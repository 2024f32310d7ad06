//! The brake on mass deletion. A DesiredSet means "delete everything else",
//! so a manager that lost its memory — a stale cache, a restored backup, a
//! bug — could empty the worker with one message. The manager lists in each
//! DesiredSet the mirrors it knows it withdraws (their Jobs are being
//! deleted, finished past retention, or placed elsewhere), and says when the
//! cluster comes back from Lost. Those it released and the *unknown*
//! orphans (the rest) are judged apart, by a brake each: when the orphans of
//! one kind are more than `share` of the live mirrors and at least
//! `at_least`, none of them is deleted until the same picture has held for
//! `confirm`. Ordinary churn never trips it; a cluster back from Lost with
//! more than half its mirrors placed elsewhere does, and its released
//! mirrors that can start no Pod (fenced) wait for the confirmation; one
//! that may still run Pods is never held ([`super::orphans`]).

use std::time::{Duration, Instant};

/// When the brake holds, and for how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BrakeSettings {
    /// Share of the live mirrors (0 to 1) that orphans of one kind must
    /// exceed.
    pub share: f64,
    /// Unknown orphans below this many never trip it.
    pub at_least: usize,
    /// How long the brake holds before the deletions go ahead.
    pub confirm: Duration,
}

impl Default for BrakeSettings {
    fn default() -> Self {
        BrakeSettings {
            share: 0.5,
            at_least: 20,
            confirm: Duration::from_secs(5 * 60),
        }
    }
}

/// What one orphan sweep may delete of one kind of orphans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrakeVerdict {
    /// Few enough: delete them.
    Release,
    /// Delete none of them yet; `first` on the sweep that began holding.
    Hold {
        orphans: usize,
        live: usize,
        left: Duration,
        first: bool,
    },
    /// Held for the whole confirmation time: delete them.
    Confirmed { orphans: usize, live: usize },
}

/// The brake and what it remembers between sweeps: since when it holds.
#[derive(Debug, Clone, Default)]
pub struct Brake {
    settings: BrakeSettings,
    holding_since: Option<Instant>,
}

impl Brake {
    pub fn new(settings: BrakeSettings) -> Self {
        Brake {
            settings,
            holding_since: None,
        }
    }

    /// Judges a sweep that found `orphans` of its kind among `live` mirrors (the
    /// orphans included) at `now`.
    pub fn judge(&mut self, orphans: usize, live: usize, now: Instant) -> BrakeVerdict {
        let BrakeSettings {
            share,
            at_least,
            confirm,
        } = self.settings;
        let trips = orphans > 0 && orphans >= at_least && orphans as f64 > share * live as f64;
        if !trips {
            self.holding_since = None;
            return BrakeVerdict::Release;
        }
        let since = *self.holding_since.get_or_insert(now);
        let held = now.saturating_duration_since(since);
        if held >= confirm {
            self.holding_since = None;
            return BrakeVerdict::Confirmed { orphans, live };
        }
        BrakeVerdict::Hold {
            orphans,
            live,
            left: confirm - held,
            first: since == now,
        }
    }

    /// Whether the brake holds deletions now.
    #[cfg(test)]
    pub fn holding(&self) -> bool {
        self.holding_since.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    fn brake() -> Brake {
        Brake::new(BrakeSettings::default())
    }

    #[test]
    fn few_or_a_small_share_of_unknown_orphans_are_released() {
        let now = Instant::now();
        assert_eq!(brake().judge(0, 0, now), BrakeVerdict::Release, "nothing");
        assert_eq!(
            brake().judge(19, 20, now),
            BrakeVerdict::Release,
            "below the minimum, however large the share"
        );
        assert_eq!(
            brake().judge(50, 100, now),
            BrakeVerdict::Release,
            "half is not more than half"
        );
    }

    #[test]
    fn more_than_half_and_at_least_twenty_holds_from_the_first_sweep() {
        let now = Instant::now();
        let mut brake = brake();
        assert_eq!(
            brake.judge(51, 100, now),
            BrakeVerdict::Hold {
                orphans: 51,
                live: 100,
                left: 5 * MINUTE,
                first: true
            }
        );
        assert!(brake.holding());
        assert_eq!(
            brake.judge(60, 100, now + MINUTE),
            BrakeVerdict::Hold {
                orphans: 60,
                live: 100,
                left: 4 * MINUTE,
                first: false
            },
            "a later sweep holds on, not anew"
        );
    }

    #[test]
    fn a_hold_confirmed_for_the_whole_time_releases_and_starts_over() {
        let now = Instant::now();
        let mut brake = brake();
        brake.judge(20, 20, now);
        assert_eq!(
            brake.judge(20, 20, now + 5 * MINUTE),
            BrakeVerdict::Confirmed {
                orphans: 20,
                live: 20
            }
        );
        assert!(!brake.holding());
    }

    #[test]
    fn a_picture_that_stops_tripping_ends_the_hold_and_the_next_one_waits_anew() {
        let now = Instant::now();
        let mut brake = brake();
        brake.judge(30, 40, now);
        assert_eq!(brake.judge(5, 40, now + MINUTE), BrakeVerdict::Release);
        assert!(!brake.holding());
        assert!(
            matches!(
                brake.judge(30, 40, now + 6 * MINUTE),
                BrakeVerdict::Hold { first: true, .. }
            ),
            "the time held before does not count"
        );
    }

    #[test]
    fn the_settings_move_the_threshold() {
        let now = Instant::now();
        let mut strict = Brake::new(BrakeSettings {
            share: 0.1,
            at_least: 2,
            confirm: MINUTE,
        });
        assert!(matches!(
            strict.judge(2, 10, now),
            BrakeVerdict::Hold { .. }
        ));
        let mut off = Brake::new(BrakeSettings {
            share: 1.0,
            ..BrakeSettings::default()
        });
        assert_eq!(
            off.judge(100, 100, now),
            BrakeVerdict::Release,
            "a share of 1 never trips"
        );
    }
}
