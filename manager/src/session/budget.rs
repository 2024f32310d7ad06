//! What one session may send over time: messages and bytes a second, each
//! a token bucket ([`TokenBucket`], the limiter every other part of
//! jobrelay uses) with room for a burst. An agent that sends more ends its
//! session, which the manager shows on its WorkerCluster; it dials again and
//! starts with full buckets, so a misbehaving agent is cut often, not once.
//!
//! The bursts hold what a real agent sends at once: after a reconnect, one
//! status for each of its mirrors (a Hello holds up to ~70,000), each a few
//! kilobytes. The rates hold a busy cluster's steady flow many times over.

use jobrelay_process::rate::{RateLimit, TokenBucket};
use tokio::time::Instant;

/// How long the rates' worth a session may send at once.
const BURST_SECONDS: u32 = 20;

/// The default messages a second a session may send.
pub const DEFAULT_MESSAGES_PER_SECOND: u32 = 5_000;
/// The default bytes a second a session may send (16 MiB).
pub const DEFAULT_BYTES_PER_SECOND: u32 = 16 * 1024 * 1024;

/// How long a cluster whose session was cut over its budget waits before
/// the manager takes its next Hello: a flooding peer gets one burst per
/// hold-off, not one per reconnect.
pub const HOLD_OFF: std::time::Duration = std::time::Duration::from_secs(10);

/// What is left of the hold-off of a cluster whose last session was cut
/// over its budget at `cut_at`; `None` once it passed (or none was cut).
pub fn holding_off(
    cut_at: Option<std::time::Instant>,
    now: std::time::Instant,
) -> Option<std::time::Duration> {
    let left = HOLD_OFF.checked_sub(now.saturating_duration_since(cut_at?))?;
    (!left.is_zero()).then_some(left)
}

/// The rates of every session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rates {
    /// Messages a second (0: no limit).
    pub messages: u32,
    /// Bytes a second, encoded (0: no limit).
    pub bytes: u32,
}

impl Default for Rates {
    fn default() -> Self {
        Rates {
            messages: DEFAULT_MESSAGES_PER_SECOND,
            bytes: DEFAULT_BYTES_PER_SECOND,
        }
    }
}

/// A session that sent more than its rates allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "more than {limit} {what} a second ({burst} at once) — more than any agent needs; if this agent is ours, ask for a higher --relay-session-{what}-per-second"
)]
pub struct OverBudget {
    pub what: &'static str,
    pub limit: u32,
    pub burst: u64,
}

/// One session's buckets.
#[derive(Debug)]
pub struct Budget {
    rates: Rates,
    messages: TokenBucket,
    bytes: TokenBucket,
}

fn limit(per_second: u32) -> RateLimit {
    match per_second {
        0 => RateLimit::Unlimited,
        rate => RateLimit::PerSecond {
            qps: f64::from(rate),
            burst: rate.saturating_mul(BURST_SECONDS),
        },
    }
}

impl Budget {
    /// Full buckets at `now`.
    pub fn new(rates: Rates, now: Instant) -> Self {
        Budget {
            rates,
            messages: TokenBucket::new(limit(rates.messages), now),
            bytes: TokenBucket::new(limit(rates.bytes), now),
        }
    }

    /// Charges one message of `size` bytes received at `now`.
    pub fn charge(&mut self, size: usize, now: Instant) -> Result<(), OverBudget> {
        let over = |what, limit: u32| OverBudget {
            what,
            limit,
            burst: u64::from(limit) * u64::from(BURST_SECONDS),
        };
        if !self.messages.try_take(1, now) {
            return Err(over("messages", self.rates.messages));
        }
        if !self.bytes.try_take(size, now) {
            return Err(over("bytes", self.rates.bytes));
        }
        Ok(())
    }
}

/// How long a session at `rates` may send at full speed (`messages` of
/// `size` bytes a second) before it is cut; `None`: never.
#[cfg(test)]
fn lasts(rates: Rates, messages: u32, size: usize) -> Option<std::time::Duration> {
    let mut budget = Budget::new(rates, Instant::now());
    let start = Instant::now();
    let step = std::time::Duration::from_secs(1) / messages;
    let mut now = start;
    for _ in 0..(messages as usize * 120) {
        if budget.charge(size, now).is_err() {
            return Some(now - start);
        }
        now += step;
    }
    None
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_burst_of_statuses_after_a_reconnect_is_taken() {
        let mut budget = Budget::new(Rates::default(), Instant::now());
        let now = Instant::now();
        for _ in 0..70_000 {
            assert_eq!(budget.charge(2 * 1024, now), Ok(()));
        }
    }

    #[test]
    fn a_steady_flow_within_the_rates_is_never_cut() {
        assert_eq!(lasts(Rates::default(), 4_000, 2 * 1024), None);
    }

    #[test]
    fn too_many_messages_end_the_session_naming_the_limit() {
        let rates = Rates {
            messages: 10,
            bytes: 0,
        };
        let mut budget = Budget::new(rates, Instant::now());
        let now = Instant::now();
        for _ in 0..200 {
            assert_eq!(budget.charge(1, now), Ok(()));
        }
        let over = budget.charge(1, now).unwrap_err();
        assert_eq!(over.what, "messages");
        let message = over.to_string();
        assert!(
            message.contains("more than 10 messages a second (200 at once)")
                && message.contains("--relay-session-messages-per-second"),
            "{message}"
        );
        assert_eq!(
            budget.charge(1, now + Duration::from_millis(100)),
            Ok(()),
            "the bucket refills"
        );
    }

    #[test]
    fn too_many_bytes_end_the_session_even_in_few_messages() {
        let big = 256 * 1024;
        let cut_after = lasts(Rates::default(), 1_000, big).expect("cut");
        assert!(
            cut_after < Duration::from_secs(60),
            "256 KiB messages at 1,000 a second: cut after {cut_after:?}"
        );
        let mut budget = Budget::new(Rates::default(), Instant::now());
        let now = Instant::now();
        let over = std::iter::repeat_n(big, 10_000)
            .find_map(|size| budget.charge(size, now).err())
            .expect("over");
        assert_eq!(over.what, "bytes");
    }

    #[test]
    fn a_cluster_cut_over_its_budget_waits_out_the_hold_off() {
        let cut = std::time::Instant::now();
        assert_eq!(holding_off(None, cut), None, "never cut: no wait");
        assert_eq!(holding_off(Some(cut), cut), Some(HOLD_OFF));
        assert_eq!(
            holding_off(Some(cut), cut + Duration::from_secs(4)),
            Some(HOLD_OFF - Duration::from_secs(4))
        );
        assert_eq!(holding_off(Some(cut), cut + HOLD_OFF), None);
    }

    #[test]
    fn a_rate_of_zero_is_no_limit() {
        let rates = Rates {
            messages: 0,
            bytes: 0,
        };
        assert_eq!(lasts(rates, 1_000, 4 * 1024 * 1024), None);
    }
}
