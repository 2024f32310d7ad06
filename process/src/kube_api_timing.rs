//! Times every request a jobrelay process sends to its Kubernetes API
//! server, into `jobrelay_kube_api_request_duration_seconds` by verb,
//! resource and status code. The layer sits right in front of kube's own
//! stack, behind the rate limit and the write fence: a request waiting for
//! its token, or withheld by the fence, is not timed as the API server's.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::time::Instant;
use tower::{Layer, Service};

use crate::metrics::{KubeApiRequest, kube_api_request};

/// Puts [`Timed`] in front of a service.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimingLayer;

impl<S> Layer<S> for TimingLayer {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Timed { inner }
    }
}

/// A service whose every request is timed until its response (headers).
#[derive(Debug, Clone)]
pub struct Timed<S> {
    inner: S,
}

impl<S, B, R> Service<http::Request<B>> for Timed<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Unpin,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = TimedResponse<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let (verb, resource) = classify(request.method(), request.uri());
        TimedResponse {
            inner: self.inner.call(request),
            verb,
            resource,
            started: Instant::now(),
        }
    }
}

/// A response on its way; records its time once it is here.
pub struct TimedResponse<F> {
    inner: F,
    verb: &'static str,
    resource: String,
    started: Instant,
}

impl<F, R, E> Future for TimedResponse<F>
where
    F: Future<Output = Result<http::Response<R>, E>> + Unpin,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let answered = ready!(Pin::new(&mut this.inner).poll(cx));
        let code = match &answered {
            Ok(response) => response.status().as_u16().to_string(),
            Err(_) => "error".to_string(),
        };
        kube_api_request(
            KubeApiRequest {
                verb: this.verb.to_string(),
                resource: std::mem::take(&mut this.resource),
                code,
            },
            this.started.elapsed(),
        );
        Poll::Ready(answered)
    }
}

/// The Kubernetes verb and the resource of a request, as the API server's
/// own request metrics name them: the resource in `resource.group/sub`
/// form (`jobs.batch/status`; core resources without a group), and a
/// non-resource request (`/version`, discovery) by its path.
pub fn classify(method: &http::Method, uri: &http::Uri) -> (&'static str, String) {
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    let non_resource = || (verb(method, true, false), uri.path().to_string());
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return non_resource(),
    };
    let (resource, tail) = match rest {
        // A Namespace's own subresources: /api/v1/namespaces/<name>/status.
        ["namespaces", _, "status" | "finalize"] => ("namespaces", &rest[1..]),
        ["namespaces", _, resource, tail @ ..] => (*resource, tail),
        [resource, tail @ ..] => (*resource, tail),
        // Discovery: /api/v1, /apis/batch/v1.
        [] => return non_resource(),
    };
    let mut named = resource.to_string();
    if !group.is_empty() {
        named = format!("{named}.{group}");
    }
    if let Some(subresource) = tail.get(1) {
        named = format!("{named}/{subresource}");
    }
    let watch = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    (verb(method, !tail.is_empty(), watch), named)
}

/// The verb of a request with `method`, on one object (`named`) or a
/// collection, watching or not.
fn verb(method: &http::Method, named: bool, watch: bool) -> &'static str {
    use http::Method;
    match *method {
        Method::GET if watch => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        Method::HEAD => "head",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use http::Method;

    use super::*;

    fn classified(method: Method, uri: &str) -> (&'static str, String) {
        classify(&method, &uri.parse().expect("a URI"))
    }

    #[test]
    fn requests_are_named_by_verb_and_resource() {
        for (method, uri, verb, resource) in [
            (
                Method::GET,
                "/api/v1/pods?labelSelector=a%3Db",
                "list",
                "pods",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ml/pods?watch=true&timeoutSeconds=60",
                "watch",
                "pods",
            ),
            (
                Method::GET,
                "/apis/batch/v1/namespaces/ml/jobs/train",
                "get",
                "jobs.batch",
            ),
            (
                Method::PATCH,
                "/apis/batch/v1/namespaces/ml/jobs/train/status",
                "patch",
                "jobs.batch/status",
            ),
            (
                Method::POST,
                "/apis/batch/v1/namespaces/ml/jobs?fieldManager=x",
                "create",
                "jobs.batch",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/ml/pods/train-0",
                "delete",
                "pods",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/ml/pods",
                "deletecollection",
                "pods",
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/jr/leases/m",
                "update",
                "leases.coordination.k8s.io",
            ),
            (
                Method::GET,
                "/apis/jobrelay.dev/v1alpha1/workerclusters",
                "list",
                "workerclusters.jobrelay.dev",
            ),
            (
                Method::PATCH,
                "/apis/jobrelay.dev/v1alpha1/workerclusters/w1/status",
                "patch",
                "workerclusters.jobrelay.dev/status",
            ),
            (Method::GET, "/api/v1/namespaces", "list", "namespaces"),
            (Method::GET, "/api/v1/namespaces/ml", "get", "namespaces"),
            (
                Method::PUT,
                "/api/v1/namespaces/ml/finalize",
                "update",
                "namespaces/finalize",
            ),
            (Method::GET, "/version", "get", "/version"),
            (Method::GET, "/apis/batch/v1", "get", "/apis/batch/v1"),
            // As the request reaches the layer with kube's base URI in front.
            (
                Method::GET,
                "https://10.0.0.1:6443/api/v1/namespaces/ml/pods/p",
                "get",
                "pods",
            ),
        ] {
            assert_eq!(
                classified(method.clone(), uri),
                (verb, resource.to_string()),
                "{method} {uri}"
            );
        }
    }

    /// Answers every request with the status it was made with.
    struct Answer(u16);

    impl Service<http::Request<()>> for Answer {
        type Response = http::Response<()>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            let mut response = http::Response::new(());
            *response.status_mut() = http::StatusCode::from_u16(self.0).expect("a status");
            std::future::ready(Ok(response))
        }
    }

    #[tokio::test]
    async fn each_answer_is_counted_with_its_status_code() {
        let mut service = TimingLayer.layer(Answer(409));
        let request = http::Request::post("/apis/batch/v1/namespaces/t/jobs/timing-test")
            .body(())
            .expect("a request");
        let response = service.call(request).await.expect("answered");
        assert_eq!(response.status(), 409);
        let mut registry = prometheus_client::registry::Registry::with_prefix("jobrelay");
        crate::metrics::register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        let line = "jobrelay_kube_api_request_duration_seconds_count{verb=\"create\",resource=\"jobs.batch\",code=\"409\"} 1\n";
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}
