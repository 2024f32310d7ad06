//! How many deletions the agent may send now: one token bucket refilled at
//! `--deletions-per-second`, shared by everything that deletes (mirrors,
//! lost mirrors' Pods, the orphan sweep, terminated Pods), so a sweep of
//! thousands is worked off steadily instead of flooding the worker's API
//! server.

use jobrelay_process::{RateLimit, SharedBucket};
use tokio::time::Instant;

/// At most one second's worth is saved up. Clones share the pace.
#[derive(Clone, Debug)]
pub struct DeletionPace(SharedBucket);

impl DeletionPace {
    pub fn per_second(per_second: u32) -> Self {
        DeletionPace::starting_at(per_second, Instant::now())
    }

    fn starting_at(per_second: u32, now: Instant) -> Self {
        let per_second = per_second.max(1);
        let limit = RateLimit::PerSecond {
            qps: f64::from(per_second),
            burst: per_second,
        };
        DeletionPace(SharedBucket::new(limit, now))
    }

    /// Takes `n` deletions from the pace if that many are left; else
    /// takes none (the caller tries again on its next pass).
    pub fn try_take_n(&self, n: usize) -> bool {
        self.take_at(Instant::now(), n)
    }

    /// Waits for one deletion's turn (for a caller with nothing else to do).
    pub async fn take(&self) {
        self.0.wait_for(1).await;
    }

    fn take_at(&self, now: Instant, n: usize) -> bool {
        self.0.try_take(n, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_is_capped_at_one_seconds_worth_then_refills_with_time() {
        let start = Instant::now();
        let pace = DeletionPace::starting_at(10, start);
        let taken = (0..100).filter(|_| pace.take_at(start, 1)).count();
        assert_eq!(taken, 10);
        assert!(!pace.take_at(start + Duration::from_millis(50), 1));
        let half_second = start + Duration::from_millis(550);
        let taken = (0..100).filter(|_| pace.take_at(half_second, 1)).count();
        assert_eq!(taken, 5);
        let much_later = half_second + Duration::from_secs(3600);
        let taken = (0..100).filter(|_| pace.take_at(much_later, 1)).count();
        assert_eq!(taken, 10, "idle time saves up no more than one second");
        assert!(!pace.take_at(much_later, 1), "spent");
        let later = much_later + Duration::from_millis(300);
        assert!(!pace.take_at(later, 4), "three saved up are not four");
        assert!(pace.take_at(later, 3), "and refusing four took none");
    }

    #[tokio::test(start_paused = true)]
    async fn clones_share_one_budget_and_a_waiter_waits_its_turn() {
        let pace = DeletionPace::per_second(2);
        let other = pace.clone();
        assert!(pace.try_take_n(2));
        assert!(!other.try_take_n(1), "the clone saw the same tokens go");
        let start = tokio::time::Instant::now();
        other.take().await;
        assert_eq!(start.elapsed(), Duration::from_millis(500));
    }
}
