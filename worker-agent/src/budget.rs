//! How many deletions the agent may send now: a token bucket refilled at
//! `--deletions-per-second`, so a sweep of thousands of orphans is worked off
//! steadily instead of flooding the worker's API server.

use std::time::Instant;

pub struct Budget {
    per_second: f64,
    /// At most one second's worth is saved up.
    tokens: f64,
    last: Instant,
}

impl Budget {
    pub fn per_second(per_second: u32) -> Self {
        let per_second = f64::from(per_second.max(1));
        Budget {
            per_second,
            tokens: per_second,
            last: Instant::now(),
        }
    }

    /// Takes `n` deletions from the budget if that many are left; else
    /// takes none.
    pub fn try_take_n(&mut self, n: usize) -> bool {
        self.take_at(Instant::now(), n)
    }

    fn take_at(&mut self, now: Instant, n: usize) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.per_second);
        let wanted = n as f64;
        if self.tokens >= wanted {
            self.tokens -= wanted;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_is_capped_at_one_seconds_worth_then_refills_with_time() {
        let mut budget = Budget::per_second(10);
        let start = budget.last;
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
