//! Pacing of the manager's own deletions, so that a backlog (thousands of
//! Jobs whose retention ran out while the manager was down) is worked off at
//! a steady rate, with progress in the log, instead of in one burst.
//!
//! A Job due for deletion is given a turn, one interval after the previous
//! one, and keeps it when asked again; its reconcile is requeued for that
//! moment instead of waiting in a reconcile slot, so a backlog never holds
//! up dispatch.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use jobrelay_process::{RateLimit, TokenBucket};
use tokio::time::Instant;
use tracing::info;

/// How often progress is logged, in deletions.
const LOG_EVERY: u64 = 50;
/// A turn not taken this long after it came (its Job went otherwise) is dropped.
const STALE_TURN: Duration = Duration::from_secs(60);

pub struct DeletionTurns {
    turns: Mutex<Turns>,
    done: AtomicU64,
}

struct Turns {
    /// The shared rate limiter, one turn per token, nothing saved up.
    bucket: TokenBucket,
    by_key: HashMap<String, Instant>,
}

impl DeletionTurns {
    pub fn per_second(rate: f64) -> DeletionTurns {
        DeletionTurns::starting_at(rate, Instant::now())
    }

    fn starting_at(rate: f64, now: Instant) -> DeletionTurns {
        let limit = RateLimit::PerSecond {
            qps: rate,
            burst: 1,
        };
        DeletionTurns {
            turns: Mutex::new(Turns {
                bucket: TokenBucket::new(limit, now),
                by_key: HashMap::new(),
            }),
            done: AtomicU64::new(0),
        }
    }

    /// `None` when it is `key`'s turn now; else how long until it is.
    pub fn turn(&self, key: &str) -> Option<Duration> {
        self.turn_at(key, Instant::now())
    }

    fn turn_at(&self, key: &str, now: Instant) -> Option<Duration> {
        let mut turns = self.turns.lock().unwrap_or_else(|p| p.into_inner());
        let slot = match turns.by_key.remove(key) {
            Some(slot) => slot,
            None => now + turns.bucket.take(now),
        };
        if slot <= now {
            return None;
        }
        turns.by_key.retain(|_, at| *at + STALE_TURN > now);
        turns.by_key.insert(key.to_string(), slot);
        Some(slot - now)
    }

    /// Counts one deletion done, logging progress now and then.
    pub fn done(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let waiting = self.waiting();
        if done.is_multiple_of(LOG_EVERY) || waiting == 0 {
            info!(
                deleted = done,
                waiting, "retention: manager Jobs deleted so far"
            );
        }
    }

    /// Jobs holding a turn that has not come yet.
    pub fn waiting(&self) -> u64 {
        self.turns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_key
            .len() as u64
    }

    /// Deletions done since start.
    pub fn total(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_come_one_interval_apart_and_are_kept_when_asked_again() {
        let start = Instant::now();
        let pace = DeletionTurns::starting_at(10.0, start);
        assert_eq!(pace.turn_at("a", start), None, "the first turn is now");
        let waits: Vec<Option<Duration>> = ["b", "c", "d"]
            .iter()
            .map(|k| pace.turn_at(k, start))
            .collect();
        assert_eq!(
            waits,
            [100, 200, 300].map(|ms| Some(Duration::from_millis(ms)))
        );
        assert_eq!(pace.waiting(), 3);
        let later = start + Duration::from_millis(150);
        assert_eq!(pace.turn_at("b", later), None, "b's turn has come");
        assert_eq!(
            pace.turn_at("c", later),
            Some(Duration::from_millis(50)),
            "c keeps its place instead of queueing again"
        );
        assert_eq!(
            pace.turn_at("e", later),
            Some(Duration::from_millis(250)),
            "a newcomer queues behind d"
        );
        pace.done();
        assert_eq!(pace.total(), 1);
    }
}
