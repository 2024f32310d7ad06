//! How fast the agent's log streams send, all of them together: one token
//! bucket (jobrelay's, `jobrelay_process::rate`) of kibibytes, refilled at
//! [`BYTES_PER_SECOND`]. The manager budgets each session's bytes (16 MiB/s);
//! logs take a quarter of it at most, so statuses and deletions of a busy
//! worker are never held back behind someone's `--follow`.

use jobrelay_process::{RateLimit, SharedBucket};
use tokio::time::Instant;

/// Log bytes the agent sends a second at most, over all its streams.
pub const BYTES_PER_SECOND: u32 = 4 * 1024 * 1024;
/// Bytes one token pays for; a message pays for whole tokens.
const TOKEN_BYTES: usize = 1024;
/// Tokens saved up at most: a quarter second's worth.
const BURST: u32 = BYTES_PER_SECOND / TOKEN_BYTES as u32 / 4;

/// Clones share the pace.
#[derive(Clone, Debug)]
pub struct LogPace(SharedBucket);

impl Default for LogPace {
    fn default() -> Self {
        LogPace::starting_at(Instant::now())
    }
}

impl LogPace {
    fn starting_at(now: Instant) -> Self {
        let limit = RateLimit::PerSecond {
            qps: f64::from(BYTES_PER_SECOND) / TOKEN_BYTES as f64,
            burst: BURST,
        };
        LogPace(SharedBucket::new(limit, now))
    }

    /// Waits for the turn of a message of `bytes`.
    pub async fn take(&self, bytes: usize) {
        self.0.wait_for(bytes.div_ceil(TOKEN_BYTES)).await;
    }

    /// Takes the tokens of `bytes` at `now`; how long until they are paid.
    #[cfg(test)]
    fn wait_for(&self, bytes: usize, now: Instant) -> std::time::Duration {
        self.0.take_n(bytes.div_ceil(TOKEN_BYTES), now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_quarter_seconds_worth_goes_at_once_then_bytes_wait_their_turn() {
        let start = Instant::now();
        let pace = LogPace::starting_at(start);
        let burst = BYTES_PER_SECOND as usize / 4;
        assert_eq!(pace.wait_for(burst, start), Duration::ZERO);
        // A chunk of 32 KiB after the burst: 32 KiB at 4 MiB/s.
        let wait = pace.wait_for(32 * 1024, start);
        assert_eq!(wait.as_micros(), 7_812, "{wait:?}");
        let later = start + Duration::from_secs(10);
        assert_eq!(
            pace.wait_for(burst, later),
            Duration::ZERO,
            "a quiet spell saves up no more than the burst"
        );
        assert!(!pace.wait_for(1, later).is_zero());
    }

    #[test]
    fn a_message_pays_for_whole_kibibytes() {
        let start = Instant::now();
        let pace = LogPace::starting_at(start);
        for _ in 0..BURST {
            assert_eq!(pace.wait_for(1, start), Duration::ZERO);
        }
        assert!(!pace.wait_for(0, start).is_zero(), "an empty one too");
    }

    #[tokio::test(start_paused = true)]
    async fn clones_share_one_pace() {
        let pace = LogPace::default();
        let other = pace.clone();
        pace.take(BYTES_PER_SECOND as usize / 4).await;
        let start = Instant::now();
        other.take(BYTES_PER_SECOND as usize / 2).await;
        assert_eq!(start.elapsed(), Duration::from_millis(500));
    }
}
