//! The one rate limiter of jobrelay: a token bucket. The Kubernetes client
//! waits on it for every request (`kube_client`), the agent's deletion budget
//! and log pace (a [`SharedBucket`] each) and the manager's retention pace
//! draw on it too.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How fast requests may go to the Kubernetes API server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateLimit {
    /// As fast as they come.
    Unlimited,
    /// `qps` a second on average; up to `burst` at once after a quiet spell.
    PerSecond { qps: f64, burst: u32 },
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateLimit::Unlimited => write!(f, "--kube-api-qps=0, no limit"),
            RateLimit::PerSecond { qps, burst } => {
                write!(f, "--kube-api-qps={qps}, --kube-api-burst={burst}")
            }
        }
    }
}

/// A token bucket that never refuses: it holds up to `burst` tokens, refilled
/// at `qps` a second; a request that finds none takes one it is owed, and
/// waits until the refill has paid for it. Tokens below zero are the ones
/// already promised to waiting requests, so requests are served in the order
/// they asked, `1/qps` apart.
///
/// [`TokenBucket::try_take`] is the refusing kind of the same bucket, for
/// callers that would rather do something else than wait.
#[derive(Debug)]
pub struct TokenBucket {
    limit: RateLimit,
    tokens: f64,
    refilled_at: Instant,
}

impl TokenBucket {
    /// A full bucket: the first `burst` requests go at once.
    pub fn new(limit: RateLimit, now: Instant) -> Self {
        let tokens = match limit {
            RateLimit::Unlimited => 0.0,
            RateLimit::PerSecond { burst, .. } => f64::from(burst),
        };
        TokenBucket {
            limit,
            tokens,
            refilled_at: now,
        }
    }

    /// Takes one token at `now`; how long the request must wait for it.
    pub fn take(&mut self, now: Instant) -> Duration {
        let RateLimit::PerSecond { qps, .. } = self.limit else {
            return Duration::ZERO;
        };
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / qps)
        }
    }

    /// Takes `n` tokens at `now` if that many are there; else takes none.
    pub fn try_take(&mut self, n: usize, now: Instant) -> bool {
        if self.limit == RateLimit::Unlimited {
            return true;
        }
        self.refill(now);
        let wanted = n as f64;
        if self.tokens >= wanted {
            self.tokens -= wanted;
            true
        } else {
            false
        }
    }

    fn refill(&mut self, now: Instant) {
        let RateLimit::PerSecond { qps, burst } = self.limit else {
            return;
        };
        let elapsed = now.saturating_duration_since(self.refilled_at);
        self.tokens = (self.tokens + elapsed.as_secs_f64() * qps).min(f64::from(burst));
        self.refilled_at = self.refilled_at.max(now);
    }
}

/// A [`TokenBucket`] several tasks draw on together: clones share it.
#[derive(Clone, Debug)]
pub struct SharedBucket(Arc<Mutex<TokenBucket>>);

impl SharedBucket {
    pub fn new(limit: RateLimit, now: Instant) -> Self {
        SharedBucket(Arc::new(Mutex::new(TokenBucket::new(limit, now))))
    }

    /// Takes `n` tokens (at least one) at `now`, each owed in turn; how
    /// long until the last of them is paid.
    pub fn take_n(&self, n: usize, now: Instant) -> Duration {
        let mut bucket = self.bucket();
        (0..n.max(1))
            .map(|_| bucket.take(now))
            .last()
            .unwrap_or_default()
    }

    /// [`TokenBucket::try_take`] of the shared bucket.
    pub fn try_take(&self, n: usize, now: Instant) -> bool {
        self.bucket().try_take(n, now)
    }

    /// Waits until `n` tokens taken now are paid.
    pub async fn wait_for(&self, n: usize) {
        let wait = self.take_n(n, Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    fn bucket(&self) -> MutexGuard<'_, TokenBucket> {
        // Only numbers inside, consistent between any two statements.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited(qps: f64, burst: u32) -> RateLimit {
        RateLimit::PerSecond { qps, burst }
    }

    fn millis(duration: Duration) -> f64 {
        duration.as_secs_f64() * 1000.0
    }

    fn assert_waits(bucket: &mut TokenBucket, now: Instant, expected_ms: f64) {
        let wait = millis(bucket.take(now));
        assert!(
            (wait - expected_ms).abs() < 0.001,
            "expected a wait of {expected_ms} ms, got {wait} ms"
        );
    }

    #[test]
    fn the_burst_goes_at_once_then_requests_are_spaced_one_over_qps() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(limited(10.0, 3), start);
        for _ in 0..3 {
            assert_waits(&mut bucket, start, 0.0);
        }
        assert_waits(&mut bucket, start, 100.0);
        assert_waits(&mut bucket, start, 200.0);
        assert_waits(&mut bucket, start, 300.0);
    }

    #[test]
    fn a_request_arriving_at_its_turn_does_not_wait() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(limited(4.0, 1), start);
        assert_waits(&mut bucket, start, 0.0);
        assert_waits(&mut bucket, start + Duration::from_millis(250), 0.0);
        assert_waits(&mut bucket, start + Duration::from_millis(400), 100.0);
        // The next token comes 250 ms after the one just promised (at 500 ms).
        assert_waits(&mut bucket, start + Duration::from_millis(500), 250.0);
    }

    #[test]
    fn a_quiet_spell_refills_no_more_than_the_burst() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(limited(100.0, 2), start);
        for _ in 0..2 {
            assert_waits(&mut bucket, start, 0.0);
        }
        let later = start + Duration::from_secs(60);
        for _ in 0..2 {
            assert_waits(&mut bucket, later, 0.0);
        }
        assert_waits(&mut bucket, later, 10.0);
    }

    #[test]
    fn fractional_qps_spaces_requests_seconds_apart() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(limited(0.5, 1), start);
        assert_waits(&mut bucket, start, 0.0);
        assert_waits(&mut bucket, start, 2000.0);
    }

    #[test]
    fn a_clock_that_seems_to_go_back_refills_nothing() {
        let start = Instant::now() + Duration::from_secs(1);
        let mut bucket = TokenBucket::new(limited(1.0, 1), start);
        assert_waits(&mut bucket, start, 0.0);
        assert_waits(&mut bucket, start - Duration::from_millis(500), 1000.0);
    }

    #[test]
    fn unlimited_never_waits() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(RateLimit::Unlimited, start);
        for _ in 0..100_000 {
            assert_eq!(bucket.take(start), Duration::ZERO);
        }
    }
}

#[cfg(test)]
mod shared_tests {
    use super::*;

    #[test]
    fn clones_draw_on_one_bucket_and_each_token_taken_is_owed_in_turn() {
        let start = Instant::now();
        let limit = RateLimit::PerSecond {
            qps: 10.0,
            burst: 2,
        };
        let bucket = SharedBucket::new(limit, start);
        let other = bucket.clone();
        assert_eq!(bucket.take_n(2, start), Duration::ZERO, "the burst");
        assert_eq!(other.take_n(3, start), Duration::from_millis(300));
        assert!(!bucket.try_take(1, start), "the other's debt is this one's");
        assert_eq!(
            other.take_n(0, start),
            Duration::from_millis(400),
            "at least one"
        );
    }
}
