//! How the agent reaches the manager: its endpoints, tried in turn, each
//! with the certificate files loaded at the time.

use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

use jobrelay_process::Pem;
use tokio::sync::watch;
use tonic::transport::Endpoint;

/// Why the manager cannot be dialled.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("--manager-url {url:?} is not a URL: {source}")]
    Url {
        url: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("TLS configuration: {0}")]
    Tls(#[source] tonic::transport::Error),
}

/// How to reach the manager: its endpoints, tried in turn.
pub struct Dial {
    urls: Vec<String>,
    current: usize,
    /// The current certificate files; `None` dials without TLS.
    pub tls: Option<watch::Receiver<Arc<Pem>>>,
}

impl Dial {
    pub fn new(urls: Vec<String>, tls: Option<watch::Receiver<Arc<Pem>>>) -> Self {
        Dial {
            urls,
            current: 0,
            tls,
        }
    }

    /// Whether every endpoint is a URL.
    pub fn check(&mut self) -> Result<(), DialError> {
        for _ in 0..self.urls.len() {
            self.endpoint()?;
            self.current = next(self.current, self.urls.len());
        }
        Ok(())
    }

    /// The current endpoint with the certificates loaded now.
    pub fn endpoint(&mut self) -> Result<Endpoint, DialError> {
        let url = self.urls.get(self.current).cloned().unwrap_or_default();
        let endpoint = Endpoint::from_shared(url.clone())
            .map_err(|source| DialError::Url { url, source })?
            .connect_timeout(Duration::from_secs(5))
            .http2_keep_alive_interval(Duration::from_secs(5))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true);
        let Some(tls) = &mut self.tls else {
            return Ok(endpoint);
        };
        let pem = Arc::clone(&tls.borrow_and_update());
        endpoint
            .tls_config(jobrelay_process::client::client_config(&pem))
            .map_err(DialError::Tls)
    }

    /// Moves on to the next endpoint; true when that starts a new round
    /// (always, with one endpoint).
    pub(crate) fn try_next(&mut self) -> bool {
        self.current = next(self.current, self.urls.len());
        self.current == 0
    }

    /// Resolves when the certificate files change (never without TLS).
    pub(crate) async fn certificates_changed(&mut self) {
        if let Some(tls) = &mut self.tls
            && tls.changed().await.is_ok()
        {
            return;
        }
        futures::future::pending().await
    }
}

/// Pause before the next endpoint of a round is dialled.
pub const NEXT_ENDPOINT_DELAY: Duration = Duration::from_millis(100);
/// Longest wait between two rounds of dials (jitter adds up to as much
/// again): at most 4 s, so agents find a new leader within 5 s of its
/// takeover.
pub const MAX_DELAY: Duration = Duration::from_secs(2);
/// A session that lasted this long resets the backoff.
pub const STABLE_SESSION: Duration = Duration::from_secs(30);

/// When to dial again after a session ended (or never opened): the next
/// endpoint of a round after a short pause; after a whole round, a backoff
/// from 200 ms doubling to [`MAX_DELAY`], each wait with jitter of up to as
/// much again, so agents that lost the same leader do not all dial its
/// successor at once. A session that lasted starts the backoff over.
pub struct Redial {
    backoff: ExponentialBuilder,
    delays: ExponentialBackoff,
}

impl Default for Redial {
    fn default() -> Self {
        Self::new()
    }
}

impl Redial {
    pub fn new() -> Redial {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(200))
            .with_max_delay(MAX_DELAY)
            .with_jitter()
            .without_max_times();
        Redial {
            delays: backoff.build(),
            backoff,
        }
    }

    /// After a dial that began `lasted` ago: moves `dial` to its next
    /// endpoint (a replica that served may since have stepped down; with one
    /// endpoint, the same) and says how long to wait before dialling it.
    pub fn after(&mut self, dial: &mut Dial, lasted: Duration) -> Duration {
        let round_over = dial.try_next();
        if lasted >= STABLE_SESSION {
            self.delays = self.backoff.build();
        }
        match round_over {
            true => self.delays.next().unwrap_or(MAX_DELAY),
            false => NEXT_ENDPOINT_DELAY,
        }
    }
}

/// The endpoint after `current` of `count`, round.
fn next(current: usize, count: usize) -> usize {
    (current + 1) % count.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_tried_in_turn_and_one_alone_is_always_tried_again() {
        assert_eq!([0, 1, 2].map(|i| next(i, 3)), [1, 2, 0]);
        assert_eq!(next(0, 1), 0);
    }

    #[test]
    fn a_round_of_endpoints_is_dialled_quickly_then_the_backoff_waits() {
        let urls = vec!["http://127.0.0.1:1".into(), "http://127.0.0.1:2".into()];
        let mut dial = Dial::new(urls, None);
        let mut redial = Redial::new();
        let short = Duration::from_millis(10);
        assert_eq!(redial.after(&mut dial, short), NEXT_ENDPOINT_DELAY);
        let waited = redial.after(&mut dial, short);
        assert!(
            waited >= Duration::from_millis(200) && waited <= 2 * MAX_DELAY,
            "{waited:?}"
        );
    }

    #[test]
    fn the_backoff_never_waits_longer_than_twice_its_longest_delay() {
        let mut dial = Dial::new(vec!["http://127.0.0.1:1".into()], None);
        let mut redial = Redial::new();
        for _ in 0..20 {
            assert!(redial.after(&mut dial, Duration::ZERO) <= 2 * MAX_DELAY);
        }
    }

    #[test]
    fn every_endpoint_is_checked_to_be_a_url() {
        let mut dial = Dial::new(
            vec!["https://127.0.0.1:8443".into(), "not a url".into()],
            None,
        );
        let error = dial.check().expect_err("the second is no URL");
        assert!(error.to_string().contains("\"not a url\""), "{error}");
    }
}
