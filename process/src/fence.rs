//! The fence in front of a client's writes: a replica that leads may write
//! until a deadline its lease renewals move on; past it (a renewal failed, or
//! the process was paused) every request that would change something is
//! refused before it leaves the process, so a stale leader cannot write
//! after a successor may have started. Reads always pass: a follower keeps
//! its caches warm.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::time::Instant;
use tower::{BoxError, Layer, Service};
use tracing::warn;

/// Until when writes may go out; shared by the lease keeper, which moves it,
/// and the client layer, which checks it on every request.
#[derive(Debug, Clone, Default)]
pub struct Fence {
    gate: Arc<Mutex<Gate>>,
}

#[derive(Debug, Clone, Copy, Default)]
enum Gate {
    #[default]
    Closed,
    Until(Instant),
    Always,
}

impl Fence {
    /// A fence that never closes (leader election switched off).
    pub fn open() -> Self {
        Fence {
            gate: Arc::new(Mutex::new(Gate::Always)),
        }
    }

    /// Lets writes out until `deadline`.
    pub fn open_until(&self, deadline: Instant) {
        *self.lock() = Gate::Until(deadline);
    }

    /// Refuses every write from now on.
    pub fn close(&self) {
        *self.lock() = Gate::Closed;
    }

    /// Whether a write may go out at `now`.
    pub fn is_open(&self, now: Instant) -> bool {
        match *self.lock() {
            Gate::Closed => false,
            Gate::Until(deadline) => now < deadline,
            Gate::Always => true,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Gate> {
        // Holds one value, always whole: a panic elsewhere cannot leave it
        // half-written.
        self.gate.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why a write was not sent.
#[derive(Debug, thiserror::Error)]
#[error("not the leader: {method} {path} withheld")]
pub struct Withheld {
    pub method: http::Method,
    pub path: String,
}

/// Whether a request of `method` changes something on the API server.
pub fn writes(method: &http::Method) -> bool {
    !matches!(
        *method,
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    )
}

/// Puts [`Fenced`] in front of a service.
#[derive(Debug, Clone)]
pub struct FenceLayer {
    pub fence: Fence,
}

impl<S> Layer<S> for FenceLayer {
    type Service = Fenced<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Fenced {
            inner,
            fence: self.fence.clone(),
        }
    }
}

/// A service that refuses writes while its fence is closed.
pub struct Fenced<S> {
    inner: S,
    fence: Fence,
}

type Refusable<F, R> = futures::future::Either<F, futures::future::Ready<Result<R, BoxError>>>;

impl<S, B> Service<http::Request<B>> for Fenced<S>
where
    S: Service<http::Request<B>, Error = BoxError>,
    S::Future: Future<Output = Result<S::Response, BoxError>>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Refusable<S::Future, S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if writes(request.method()) && !self.fence.is_open(Instant::now()) {
            let withheld = Withheld {
                method: request.method().clone(),
                path: request.uri().path().to_string(),
            };
            warn!(%withheld, "write withheld");
            return futures::future::Either::Right(futures::future::ready(Err(withheld.into())));
        }
        futures::future::Either::Left(self.inner.call(request))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_fence_is_open_until_its_deadline_and_shut_once_closed() {
        let now = Instant::now();
        let fence = Fence::default();
        assert!(!fence.is_open(now), "a new fence starts closed");
        fence.open_until(now + Duration::from_secs(10));
        assert!(fence.is_open(now + Duration::from_secs(9)));
        assert!(!fence.is_open(now + Duration::from_secs(10)));
        fence.close();
        assert!(!fence.is_open(now));
        assert!(Fence::open().is_open(now + Duration::from_secs(1 << 40)));
    }

    #[test]
    fn only_reads_pass_a_closed_fence() {
        assert!(!writes(&http::Method::GET));
        for method in [
            http::Method::POST,
            http::Method::PUT,
            http::Method::PATCH,
            http::Method::DELETE,
        ] {
            assert!(writes(&method), "{method}");
        }
    }

    /// Answers every request it is handed.
    struct Answer;

    impl Service<http::Request<()>> for Answer {
        type Response = ();
        type Error = BoxError;
        type Future = futures::future::Ready<Result<(), BoxError>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            futures::future::ready(Ok(()))
        }
    }

    fn request(method: http::Method) -> http::Request<()> {
        http::Request::builder()
            .method(method)
            .uri("/apis/batch/v1/namespaces/a/jobs/b")
            .body(())
            .expect("a request")
    }

    #[tokio::test]
    async fn the_layer_withholds_writes_while_closed_and_sends_them_while_open() {
        let fence = Fence::default();
        let mut service = FenceLayer {
            fence: fence.clone(),
        }
        .layer(Answer);
        assert!(service.call(request(http::Method::GET)).await.is_ok());
        let refused = service
            .call(request(http::Method::PATCH))
            .await
            .expect_err("a write through a closed fence");
        assert_eq!(
            refused.to_string(),
            "not the leader: PATCH /apis/batch/v1/namespaces/a/jobs/b withheld"
        );
        fence.open_until(Instant::now() + Duration::from_secs(60));
        assert!(service.call(request(http::Method::PATCH)).await.is_ok());
    }
}
