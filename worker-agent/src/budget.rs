//! How many deletions the agent may send now: a token bucket refilled at
//! `--deletions-per-second`, so a sweep of thousands of orphans is worked off
//! steadily instead of flooding the worker's API server.

use jobrelay_link::{RateLimit, TokenBucket};
use tokio::time::Instant;

/// At most one second's worth is saved up.
pub struct Budget(TokenBucket);

impl Budget {
    pub fn per_second(per_second: u32) -> Self {
        Budget::starting_at(per_second, Instant::now())
    }

    fn starting_at(per_second: u32, now: Instant) -> Self {
        let per_second = per_second.max(1);
        let limit = RateLimit::PerSecond {
            qps: f64::from(per_second),
            burst: per_second,
        };
        Budget(TokenBucket::new(limit, now))
    }

    /// Takes `n` deletions from the budget if that many are left; else
    /// takes none.
    pub fn try_take_n(&mut self, n: usize) -> bool {
        self.take_at(Instant::now(), n)
    }

    fn take_at(&mut self, now: Instant, n: usize) -> bool {
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
        let mut budget = Budget::starting_at(10, start);
        let taken = (0..100).filter(|_| budget.take_at(start, 1)).count();
        assert_eq!(taken, 10);
        assert!(!budget.take_at(start + Duration::from_millis(50), 1));
        let half_second = start + Duration::from_millis(550);
        let taken = (0..100).filter(|_| budget.take_at(half_second, 1)).count();
        assert_eq!(taken, 5);
        let much_later = half_second + Duration::from_secs(3600);
        let taken = (0..100).filter(|_| budget.take_at(much_later, 1)).count();
        assert_eq!(taken, 10, "idle time saves up no more than one second");
        assert!(!budget.take_at(much_later, 1), "spent");
        let later = much_later + Duration::from_millis(300);
        assert!(!budget.take_at(later, 4), "three saved up are not four");
        assert!(budget.take_at(later, 3), "and refusing four took none");
    }
}
