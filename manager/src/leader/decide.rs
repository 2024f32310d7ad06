//! What a replica does with the Lease it just read: claim it (create it,
//! renew it, or take it over once it expired) or follow its holder; and
//! until when a leader may write after a renewal.
//!
//! Expiry is judged by this replica's own clock: a Lease counts as expired
//! once it has not changed for its `leaseDurationSeconds` since this replica
//! first saw its current version, so clocks of different machines never
//! have to agree.

use std::time::Duration;

use tokio::time::Instant;

/// The three durations of leader election, as Kubernetes' own controllers
/// name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// How long a follower waits, after the Lease last changed, before it
    /// takes it over.
    pub lease_duration: Duration,
    /// How long a leader keeps writing after the start of its last
    /// successful renewal; past it the leader steps down.
    pub renew_deadline: Duration,
    /// How often the Lease is read and, by its holder, renewed.
    pub retry_period: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Why the durations cannot work together.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error(
        "--lease-duration ({lease:?}) must be longer than --renew-deadline ({renew:?}): a leader must stop writing before a follower may take its Lease"
    )]
    LeaseNotLongerThanDeadline { lease: Duration, renew: Duration },
    #[error(
        "--renew-deadline ({renew:?}) must be longer than --retry-period ({retry:?}): a leader needs more than one try to renew"
    )]
    DeadlineNotLongerThanRetry { renew: Duration, retry: Duration },
    #[error("--retry-period must be longer than 0")]
    NoRetryPeriod,
}

impl Settings {
    /// The settings, or what is wrong with them (naming the flags).
    pub fn validated(self) -> Result<Self, SettingsError> {
        if self.retry_period.is_zero() {
            return Err(SettingsError::NoRetryPeriod);
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(SettingsError::LeaseNotLongerThanDeadline {
                lease: self.lease_duration,
                renew: self.renew_deadline,
            });
        }
        if self.renew_deadline <= self.retry_period {
            return Err(SettingsError::DeadlineNotLongerThanRetry {
                renew: self.renew_deadline,
                retry: self.retry_period,
            });
        }
        Ok(self)
    }
}

/// What a read of the Lease says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Changes with every write, renewals included.
    pub resource_version: String,
    /// Empty when released.
    pub holder: String,
    pub lease_duration: Duration,
    pub transitions: i32,
}

/// The Lease as this replica knows it: the last record read and when, by
/// this replica's clock, it was first seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    pub record: Record,
    pub since: Instant,
}

/// Takes in a record read at `now`: its first sighting starts the clock on
/// its expiry; a record seen before keeps the time it was first seen.
pub fn observe(previous: Option<Sighting>, record: Record, now: Instant) -> Sighting {
    match previous {
        Some(seen) if seen.record.resource_version == record.resource_version => seen,
        _ => Sighting { record, since: now },
    }
}

/// What to do with the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Write it with this replica as holder: create it if `seen` was none,
    /// renew it if already held, take it over otherwise (`acquired`: the
    /// holder changes, so it gets a new acquire time).
    Claim { transitions: i32, acquired: bool },
    /// Another replica holds it and it has not expired.
    Follow { holder: String },
}

/// What replica `me` does with the Lease as `seen` (none: it does not
/// exist) at `now`.
pub fn step(me: &str, seen: Option<&Sighting>, now: Instant) -> Step {
    let Some(seen) = seen else {
        return Step::Claim {
            transitions: 0,
            acquired: true,
        };
    };
    let record = &seen.record;
    if record.holder == me {
        return Step::Claim {
            transitions: record.transitions,
            acquired: false,
        };
    }
    if record.holder.is_empty() || now >= seen.since + record.lease_duration {
        return Step::Claim {
            transitions: record.transitions + 1,
            acquired: true,
        };
    }
    Step::Follow {
        holder: record.holder.clone(),
    }
}

/// Until when a leader whose renewal started at `started` (and succeeded)
/// may write. A follower waits a whole lease duration after it saw that
/// renewal, which it cannot see before the renewal started; the renew
/// deadline is shorter, so the leader's writes stop first.
pub fn writes_until(started: Instant, settings: &Settings) -> Instant {
    started + settings.renew_deadline
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(version: &str, holder: &str, transitions: i32) -> Record {
        Record {
            resource_version: version.into(),
            holder: holder.into(),
            lease_duration: Duration::from_secs(15),
            transitions,
        }
    }

    fn seen(record: Record, since: Instant) -> Sighting {
        Sighting { record, since }
    }

    #[test]
    fn a_missing_lease_is_created_by_whoever_reads_it_first() {
        assert_eq!(
            step("a", None, Instant::now()),
            Step::Claim {
                transitions: 0,
                acquired: true
            }
        );
    }

    #[test]
    fn the_holder_renews_its_lease_without_a_transition() {
        let now = Instant::now();
        let held = seen(record("7", "a", 3), now - Duration::from_secs(60));
        assert_eq!(
            step("a", Some(&held), now),
            Step::Claim {
                transitions: 3,
                acquired: false
            },
            "a replica restarted under its name takes its own Lease back at once"
        );
    }

    #[test]
    fn a_follower_waits_for_a_lease_held_by_another_until_it_expires() {
        let since = Instant::now();
        let held = seen(record("7", "a", 3), since);
        assert_eq!(
            step("b", Some(&held), since + Duration::from_secs(14)),
            Step::Follow { holder: "a".into() }
        );
        assert_eq!(
            step("b", Some(&held), since + Duration::from_secs(15)),
            Step::Claim {
                transitions: 4,
                acquired: true
            }
        );
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let now = Instant::now();
        let released = seen(record("8", "", 3), now);
        assert_eq!(
            step("b", Some(&released), now),
            Step::Claim {
                transitions: 4,
                acquired: true
            }
        );
    }

    #[test]
    fn expiry_counts_from_when_the_current_version_was_first_seen() {
        let start = Instant::now();
        let first = observe(None, record("7", "a", 3), start);
        let again = observe(
            Some(first.clone()),
            record("7", "a", 3),
            start + Duration::from_secs(5),
        );
        assert_eq!(again.since, start, "the same version keeps its clock");
        let renewed = observe(
            Some(again),
            record("8", "a", 3),
            start + Duration::from_secs(10),
        );
        assert_eq!(
            renewed.since,
            start + Duration::from_secs(10),
            "a renewal starts it again"
        );
        assert_eq!(
            step("b", Some(&renewed), start + Duration::from_secs(20)),
            Step::Follow { holder: "a".into() },
            "15 s after the renewal was seen, not after the first sighting"
        );
    }

    #[test]
    fn a_leader_stops_writing_before_a_follower_may_take_over() {
        let settings = Settings::default();
        let started = Instant::now();
        // The earliest a follower can see the renewal is when it started.
        let taken_over_at = started + settings.lease_duration;
        assert!(writes_until(started, &settings) < taken_over_at);
    }

    #[test]
    fn settings_that_would_let_two_leaders_write_are_refused() {
        let defaults = Settings::default();
        assert_eq!(defaults.validated(), Ok(defaults));
        let error = Settings {
            lease_duration: Duration::from_secs(10),
            ..defaults
        }
        .validated()
        .expect_err("lease duration equal to the renew deadline");
        assert!(error.to_string().contains("--lease-duration"), "{error}");
        let error = Settings {
            retry_period: Duration::from_secs(10),
            ..defaults
        }
        .validated()
        .expect_err("retry period equal to the renew deadline");
        assert!(error.to_string().contains("--retry-period"), "{error}");
        assert_eq!(
            Settings {
                retry_period: Duration::ZERO,
                ..defaults
            }
            .validated(),
            Err(SettingsError::NoRetryPeriod)
        );
    }
}
