//! The Kubernetes client of both binaries, with an explicit client-side rate
//! limit, from the kubeconfig `--kubeconfig` names or the one kube finds.
//!
//! kube sends every request the moment it is asked to; a token bucket in
//! front of it keeps one busy process from flooding its API server, while the
//! defaults stay far above what jobrelay needs in normal operation (each
//! manager Job costs several API writes, so a limit in the single or double
//! digits would make jobrelay the bottleneck of a large batch). A request over
//! the limit waits for its token; none is ever refused.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior, Sleep};
use tower::{Layer, Service};
use tracing::{Instrument, info};

use crate::fence::{Fence, FenceLayer};
use crate::kube_api_timing::TimingLayer;
use crate::rate::{RateLimit, TokenBucket};

/// How often requests that had to wait for a token are reported in the log.
const WAIT_REPORT_INTERVAL: Duration = Duration::from_secs(10);

/// The flags that limit the requests a binary sends to its Kubernetes API
/// server.
#[derive(Debug, Clone, clap::Args)]
pub struct KubeApiFlags {
    /// Requests per second sent to the Kubernetes API server at most, on
    /// average (fractions allowed); 0: no limit. Requests over the limit wait
    /// for their turn, none is refused.
    #[arg(long, env = "JOBRELAY_KUBE_API_QPS", default_value_t = 500.0)]
    pub kube_api_qps: f64,

    /// Requests that may be sent at once, above `--kube-api-qps`, after a quiet
    /// spell; at least 1 unless `--kube-api-qps` is 0.
    #[arg(long, env = "JOBRELAY_KUBE_API_BURST", default_value_t = 1000)]
    pub kube_api_burst: u32,
}

impl KubeApiFlags {
    /// The limit the flags ask for, or what is wrong with them.
    pub fn rate_limit(&self) -> Result<RateLimit, crate::Error> {
        let qps = self.kube_api_qps;
        if !qps.is_finite() || qps < 0.0 {
            return Err(crate::Error::Qps(qps));
        }
        if qps == 0.0 {
            return Ok(RateLimit::Unlimited);
        }
        if self.kube_api_burst == 0 {
            return Err(crate::Error::Burst { qps });
        }
        Ok(RateLimit::PerSecond {
            qps,
            burst: self.kube_api_burst,
        })
    }
}

/// Where the API server is and how to sign in: the current context of the
/// kubeconfig file `kubeconfig` (`--kubeconfig`) when one is named; else
/// found the way `kube::Client::try_default` finds it (`KUBECONFIG`,
/// `~/.kube/config`, else the in-cluster service account).
pub async fn config(kubeconfig: Option<&Path>) -> Result<kube::Config, crate::Error> {
    let Some(path) = kubeconfig else {
        return Ok(kube::Config::infer().await?);
    };
    let unusable = |error: kube::config::KubeconfigError| crate::Error::Read {
        flag: "--kubeconfig",
        path: path.to_path_buf(),
        source: std::io::Error::other(error),
    };
    let file = kube::config::Kubeconfig::read_from(path).map_err(unusable)?;
    let mut config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .map_err(unusable)?;
    config.apply_debug_overrides();
    Ok(config)
}

/// A client of the API server [`config`] finds, with kube's usual stack
/// (authentication, TLS, retries, tracing) behind the rate limit, each
/// request timed ([`crate::kube_api_timing`]) and naming `user_agent` (so
/// the API server's audit log tells jobrelay's requests from others'). Logs
/// the limit once; while requests have to wait, an info line says how many
/// did, at most every ten seconds.
pub async fn client(
    kubeconfig: Option<&Path>,
    limit: RateLimit,
    user_agent: &str,
) -> Result<kube::Client, crate::Error> {
    let config = config_as(kubeconfig, user_agent).await?;
    let builder = kube::client::ClientBuilder::try_from(config)?.with_layer(&TimingLayer);
    Ok(limited(builder, limit).build())
}

/// Like [`client`], with `fence` in front of its writes.
pub async fn fenced_client(
    kubeconfig: Option<&Path>,
    limit: RateLimit,
    fence: Fence,
    user_agent: &str,
) -> Result<kube::Client, crate::Error> {
    let config = config_as(kubeconfig, user_agent).await?;
    let builder = kube::client::ClientBuilder::try_from(config)?
        .with_layer(&TimingLayer)
        .with_layer(&FenceLayer { fence });
    Ok(limited(builder, limit).build())
}

/// [`config`], naming `user_agent` in every request.
async fn config_as(
    kubeconfig: Option<&Path>,
    user_agent: &str,
) -> Result<kube::Config, crate::Error> {
    let mut config = config(kubeconfig).await?;
    let agent = http::HeaderValue::from_str(user_agent)
        .map_err(|_| crate::Error::UserAgent(user_agent.to_string()))?;
    config.headers.push((http::header::USER_AGENT, agent));
    Ok(config)
}

/// `builder` behind the rate limit `limit`.
fn limited<S>(
    builder: kube::client::ClientBuilder<S>,
    limit: RateLimit,
) -> kube::client::ClientBuilder<RateLimited<S>> {
    let limiter = Arc::new(Limiter::new(limit, Instant::now()));
    let builder = builder.with_layer(&RateLimitLayer {
        limiter: limiter.clone(),
    });
    info!("kube client rate limit: {limit}");
    if limit != RateLimit::Unlimited {
        tokio::spawn(
            report_waits(Arc::downgrade(&limiter), limit)
                .instrument(tracing::info_span!("kube_client_rate_limit")),
        );
    }
    builder
}

/// Every [`WAIT_REPORT_INTERVAL`], logs how many requests had to wait for a
/// token, if any did; ends with the last client holding the limiter.
async fn report_waits(limiter: Weak<Limiter>, limit: RateLimit) {
    let mut ticks =
        tokio::time::interval_at(Instant::now() + WAIT_REPORT_INTERVAL, WAIT_REPORT_INTERVAL);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(limiter) = limiter.upgrade() else {
            return;
        };
        let waited = limiter.waited.swap(0, Ordering::Relaxed);
        if waited > 0 {
            info!(
                "kube client rate limit reached: {waited} requests waited in the last {}s ({limit})",
                WAIT_REPORT_INTERVAL.as_secs()
            );
        }
    }
}

/// The token bucket shared by every request of one client, and the count of
/// requests that waited since the last report.
#[derive(Debug)]
struct Limiter {
    bucket: Mutex<TokenBucket>,
    waited: AtomicU64,
}

impl Limiter {
    fn new(limit: RateLimit, now: Instant) -> Self {
        Limiter {
            bucket: Mutex::new(TokenBucket::new(limit, now)),
            waited: AtomicU64::new(0),
        }
    }

    /// Takes a token; `Some(when)` if the request must wait until then.
    fn take(&self, now: Instant) -> Option<Instant> {
        // The bucket holds only numbers, always consistent between two
        // statements; a panic elsewhere cannot leave it half-updated.
        let wait = self
            .bucket
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(now);
        if wait.is_zero() {
            return None;
        }
        self.waited.fetch_add(1, Ordering::Relaxed);
        Some(now + wait)
    }
}

/// Puts [`RateLimited`] in front of a service; every service it makes shares
/// one bucket.
#[derive(Debug, Clone)]
struct RateLimitLayer {
    limiter: Arc<Limiter>,
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            limiter: self.limiter.clone(),
            token: Token::Needed,
        }
    }
}

/// A service that is ready only once it holds a token for its next request.
///
/// The client calls it from a single buffer task, which waits in
/// `poll_ready` for the token and only then hands the request on; callers
/// queue in the buffer meanwhile. The responses are still awaited by their
/// callers, so requests already sent run concurrently as before.
struct RateLimited<S> {
    inner: S,
    limiter: Arc<Limiter>,
    token: Token,
}

/// Where a [`RateLimited`] stands with the token for its next request.
enum Token {
    Needed,
    Waiting(Pin<Box<Sleep>>),
    Held,
}

impl<S, Request> Service<Request> for RateLimited<S>
where
    S: Service<Request>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        loop {
            match &mut self.token {
                Token::Needed => {
                    self.token = match self.limiter.take(Instant::now()) {
                        None => Token::Held,
                        Some(when) => Token::Waiting(Box::pin(tokio::time::sleep_until(when))),
                    };
                }
                Token::Waiting(sleep) => {
                    ready!(sleep.as_mut().poll(cx));
                    self.token = Token::Held;
                }
                Token::Held => return self.inner.poll_ready(cx),
            }
        }
    }

    fn call(&mut self, request: Request) -> Self::Future {
        debug_assert!(
            matches!(self.token, Token::Held),
            "RateLimited called before it was ready"
        );
        self.token = Token::Needed;
        self.inner.call(request)
    }
}

#[cfg(test)]
#[path = "kube_client_tests.rs"]
mod tests;
