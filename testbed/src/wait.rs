//! Waiting on a condition with a deadline. A probe reports either the value it
//! waited for or what it saw instead; on timeout the error names both, so a
//! failed test says what it waited for and what it got.

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

/// How long a scenario waits for one step.
pub const WAIT: Duration = Duration::from_secs(90);

/// How often a condition is probed.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// One look at a condition.
pub enum Seen<T> {
    /// The condition holds; this is the value waited for.
    Ready(T),
    /// Not yet; what was seen instead.
    Waiting(String),
}

/// The condition did not hold before the deadline.
#[derive(Debug, thiserror::Error)]
#[error("timed out after {timeout:?} waiting for {what}; last saw: {last_seen}")]
pub struct Timeout {
    pub what: String,
    pub timeout: Duration,
    pub last_seen: String,
}

/// Probes until the condition holds or `timeout` passes.
pub async fn try_until<T, F, Fut>(
    what: impl Display,
    timeout: Duration,
    mut probe: F,
) -> Result<T, Timeout>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Seen<T>>,
{
    let deadline = Instant::now() + timeout;
    let mut ticks = tokio::time::interval(POLL_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_seen = String::from("nothing (never probed)");
    loop {
        ticks.tick().await;
        match tokio::time::timeout_at(deadline.into(), probe()).await {
            Ok(Seen::Ready(value)) => return Ok(value),
            Ok(Seen::Waiting(seen)) => last_seen = seen,
            Err(_) => last_seen = format!("the last probe was still running ({last_seen})"),
        }
        if Instant::now() >= deadline {
            return Err(Timeout {
                what: what.to_string(),
                timeout,
                last_seen,
            });
        }
    }
}

/// Like [`try_until`], for tests: a timeout fails the test with its message.
pub async fn until<T, F, Fut>(what: impl Display, timeout: Duration, probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Seen<T>>,
{
    match try_until(what, timeout, probe).await {
        Ok(value) => value,
        Err(timeout) => panic!("{timeout}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn timeout_names_what_was_awaited_and_what_was_seen() {
        let mut probes = 0;
        let result: Result<(), Timeout> =
            try_until("the answer", Duration::from_millis(450), || {
                probes += 1;
                let seen = format!("probe {probes}");
                async move { Seen::Waiting(seen) }
            })
            .await;
        let message = result.expect_err("never ready").to_string();
        assert!(message.contains("waiting for the answer"), "{message}");
        assert!(
            message.contains(&format!("last saw: probe {probes}")),
            "{message}"
        );
        assert!(
            probes >= 2,
            "probed repeatedly until the deadline, got {probes}"
        );
    }

    #[tokio::test]
    async fn returns_the_value_once_ready() {
        let mut probes = 0;
        let value = until("the third probe", Duration::from_secs(10), || {
            probes += 1;
            let n = probes;
            async move {
                if n == 3 {
                    Seen::Ready(n)
                } else {
                    Seen::Waiting(format!("probe {n}"))
                }
            }
        })
        .await;
        assert_eq!(value, 3);
    }
}
