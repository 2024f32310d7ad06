//! Pacing of the manager's own deletions, so that a backlog (thousands of
//! Jobs whose retention ran out while the manager was down) is worked off at
//! a steady rate, with progress in the log, instead of in one burst.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;
use tracing::info;

/// How often progress is logged, in deletions.
const LOG_EVERY: u64 = 50;

pub struct Pace {
    interval: Duration,
    next: Mutex<Instant>,
    waiting: AtomicU64,
    done: AtomicU64,
}

impl Pace {
    pub fn per_second(rate: f64) -> Pace {
        Pace {
            interval: Duration::from_secs_f64(1.0 / rate),
            next: Mutex::new(Instant::now()),
            waiting: AtomicU64::new(0),
            done: AtomicU64::new(0),
        }
    }

    /// Waits for this caller's turn.
    pub async fn wait(&self) {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let slot = {
            let mut next = self.next.lock().await;
            let slot = (*next).max(Instant::now());
            *next = slot + self.interval;
            slot
        };
        tokio::time::sleep_until(slot).await;
        self.waiting.fetch_sub(1, Ordering::Relaxed);
    }

    /// Counts one deletion done, logging progress now and then.
    pub fn done(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        let waiting = self.waiting.load(Ordering::Relaxed);
        if done.is_multiple_of(LOG_EVERY) || waiting == 0 {
            info!(
                deleted = done,
                waiting, "retention: manager Jobs deleted so far"
            );
        }
    }

    /// Callers waiting for their turn now.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Deletions done since start.
    pub fn total(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn turns_come_one_interval_apart() {
        let pace = Pace::per_second(10.0);
        let start = Instant::now();
        for _ in 0..5 {
            pace.wait().await;
            pace.done();
        }
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(400),
            "the first turn is immediate"
        );
        assert_eq!(pace.total(), 5);
    }
}
