//! How the agent reaches the manager: its endpoints, tried in turn, each
//! with the certificate files loaded at the time.

use std::sync::Arc;
use std::time::Duration;

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
    pub fn try_next(&mut self) -> bool {
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
    fn every_endpoint_is_checked_to_be_a_url() {
        let mut dial = Dial::new(
            vec!["https://127.0.0.1:8443".into(), "not a url".into()],
            None,
        );
        let error = dial.check().expect_err("the second is no URL");
        assert!(error.to_string().contains("\"not a url\""), "{error}");
    }
}
