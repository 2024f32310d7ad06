//! The plaintext HTTP endpoint both binaries serve their Prometheus metrics
//! on: `GET /metrics`, OpenMetrics text rendered at each scrape; anything
//! else is 404. Each connection is served in a task of its own until the
//! process's shutdown.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tracing::{Instrument, info, warn};

use crate::Shutdown;

/// Renders every metric of the process as OpenMetrics text, now.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// The content type of OpenMetrics text.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Binds the metrics endpoint's address; the error names it.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, crate::Error> {
    TcpListener::bind(addr)
        .await
        .map_err(crate::Error::listen("the metrics endpoint", addr))
}

/// Serves `/metrics` on `listener` until the shutdown; ends early only if
/// the listener fails.
pub async fn serve(
    listener: TcpListener,
    render: Render,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    info!(listen = %listener.local_addr()?, "serving /metrics");
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => accepted?,
            () = shutdown.clone().requested() => return Ok(()),
        };
        let render = Arc::clone(&render);
        tokio::spawn(
            async move {
                if let Err(error) = connection(stream, render).await {
                    warn!(%error, "metrics connection failed");
                }
            }
            .instrument(tracing::debug_span!("metrics_connection", %peer)),
        );
    }
}

/// Answers the requests of one HTTP/1 connection.
async fn connection<IO>(io: IO, render: Render) -> Result<(), hyper::Error>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
        let render = Arc::clone(&render);
        async move { Ok::<_, Infallible>(respond(request.uri().path(), || render())) }
    });
    hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(io), service)
        .await
}

/// The answer to a request for `path`; `render` is called only for
/// `/metrics`.
fn respond(path: &str, render: impl FnOnce() -> String) -> Response<Full<Bytes>> {
    let (status, body) = match path {
        "/metrics" => (hyper::StatusCode::OK, render()),
        _ => (
            hyper::StatusCode::NOT_FOUND,
            "not found; metrics are on /metrics\n".to_string(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(OPENMETRICS),
    );
    response
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[test]
    fn only_metrics_renders() {
        let response = respond("/metrics", || "jobrelay_leader 1\n# EOF\n".into());
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()[hyper::header::CONTENT_TYPE], OPENMETRICS);
        let response = respond("/", || panic!("rendered for /"));
        assert_eq!(response.status(), 404);
    }

    #[tokio::test]
    async fn a_scrape_over_a_connection_gets_the_rendered_text() {
        let (mut client, server) = tokio::io::duplex(64 * 1024);
        let render: Render = Arc::new(|| "jobrelay_leader 1\n# EOF\n".to_string());
        let served = tokio::spawn(connection(server, render));
        client
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            .await
            .expect("request written");
        let mut answer = String::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            client.read_to_string(&mut answer),
        )
        .await
        .expect("the answer within 10s")
        .expect("the answer read");
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(
            answer.ends_with("\r\n\r\njobrelay_leader 1\n# EOF\n"),
            "{answer}"
        );
        served
            .await
            .expect("the connection task")
            .expect("served cleanly");
    }
}
