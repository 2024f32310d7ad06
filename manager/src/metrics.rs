//! Prometheus metrics of the manager, served as text on `/metrics`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tracing::{info, warn};

use crate::fleet::Fleet;
use crate::pace::Pace;

/// What the metrics are read from.
pub struct Metrics {
    pub fleet: Arc<Fleet>,
    pub deletions: Arc<Pace>,
    /// Refused sessions and failed handshakes, by reason.
    pub refusals: Mutex<BTreeMap<&'static str, u64>>,
    /// What agents report, counted by kind and labels.
    pub reports: Mutex<BTreeMap<(Report, String), u64>>,
}

/// The counted kinds of agent reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Report {
    /// `jobrelay_apply_refusals_total{cluster, reason, permanent}`.
    ApplyRefused,
    /// `jobrelay_mirrors_lost_total{cluster}`.
    MirrorLost,
    /// `jobrelay_reports_dropped_total{cluster}`: reports about mirrors the
    /// manager never placed on that cluster.
    Dropped,
}

impl Report {
    fn name_and_help(self) -> (&'static str, &'static str) {
        match self {
            Report::ApplyRefused => (
                "jobrelay_apply_refusals_total",
                "Mirrors a worker refused, by cluster, reason and whether the refusal is permanent.",
            ),
            Report::MirrorLost => (
                "jobrelay_mirrors_lost_total",
                "Mirrors removed behind jobrelay's back, by cluster.",
            ),
            Report::Dropped => (
                "jobrelay_reports_dropped_total",
                "Agent reports about mirrors not placed on their cluster, dropped, by cluster.",
            ),
        }
    }
}

impl Metrics {
    pub fn new(fleet: Arc<Fleet>, deletions: Arc<Pace>) -> Self {
        Metrics {
            fleet,
            deletions,
            refusals: Mutex::default(),
            reports: Mutex::default(),
        }
    }

    /// Counts one agent report of `kind` with these labels.
    pub fn report(&self, kind: Report, labels: &[(&str, &str)]) {
        let labels = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
            .collect::<Vec<_>>()
            .join(",");
        *self
            .reports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry((kind, labels))
            .or_default() += 1;
    }

    /// Counts a refused session or connection.
    pub fn refused(&self, reason: &'static str) {
        *self
            .refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(reason)
            .or_default() += 1;
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        metric(
            "jobrelay_retention_deleted_total",
            "counter",
            "Manager Jobs deleted because their retention ran out.",
            self.deletions.total(),
        );
        metric(
            "jobrelay_retention_waiting",
            "gauge",
            "Manager Jobs due for deletion, waiting for their turn.",
            self.deletions.waiting(),
        );
        metric(
            "jobrelay_connected_clusters",
            "gauge",
            "Worker clusters with an open session.",
            self.fleet.candidates().len() as u64,
        );
        let _ = writeln!(
            out,
            "# HELP jobrelay_sessions_refused_total Agent connections refused, by reason.\n# TYPE jobrelay_sessions_refused_total counter"
        );
        for (reason, count) in self
            .refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "jobrelay_sessions_refused_total{{reason=\"{reason}\"}} {count}"
            );
        }
        let reports = self.reports.lock().unwrap_or_else(|p| p.into_inner());
        let mut last = None;
        for ((kind, labels), count) in reports.iter() {
            let (name, help) = kind.name_and_help();
            if last != Some(*kind) {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
                last = Some(*kind);
            }
            let _ = writeln!(out, "{name}{{{labels}}} {count}");
        }
        out
    }
}

/// Serves `/metrics` on `addr` until the shutdown.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    shutdown: jobrelay_process::Shutdown,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    info!(listen = %listener.local_addr()?, "serving /metrics");
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => accepted?,
            () = shutdown.clone().requested() => return Ok(()),
        };
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let metrics = Arc::clone(&metrics);
                    async move { Ok::<_, Infallible>(respond(&request, &metrics)) }
                });
            if let Err(error) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                warn!(%error, "metrics connection failed");
            }
        });
    }
}

fn respond(request: &Request<hyper::body::Incoming>, metrics: &Metrics) -> Response<Full<Bytes>> {
    let (status, body) = if request.uri().path() == "/metrics" {
        (200, metrics.render())
    } else {
        (404, "not found; metrics are on /metrics\n".to_string())
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_metric_in_prometheus_text() {
        let (triggers, _) = tokio::sync::mpsc::unbounded_channel();
        let metrics = Metrics::new(
            Arc::new(Fleet::new(triggers)),
            Arc::new(Pace::per_second(1.0)),
        );
        metrics.deletions.done();
        metrics.refused("unknown_cluster");
        metrics.refused("unknown_cluster");
        metrics.report(Report::MirrorLost, &[("cluster", "w1")]);
        metrics.report(Report::MirrorLost, &[("cluster", "w1")]);
        metrics.report(
            Report::ApplyRefused,
            &[
                ("cluster", "w2"),
                ("reason", "QUOTA_EXCEEDED"),
                ("permanent", "false"),
            ],
        );
        let text = metrics.render();
        assert!(text.contains("# TYPE jobrelay_retention_deleted_total counter\njobrelay_retention_deleted_total 1\n"), "{text}");
        assert!(text.contains("jobrelay_retention_waiting 0\n"), "{text}");
        assert!(text.contains("jobrelay_connected_clusters 0\n"), "{text}");
        assert!(
            text.contains("jobrelay_sessions_refused_total{reason=\"unknown_cluster\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE jobrelay_mirrors_lost_total counter\njobrelay_mirrors_lost_total{cluster=\"w1\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("jobrelay_apply_refusals_total{cluster=\"w2\",reason=\"QUOTA_EXCEEDED\",permanent=\"false\"} 1\n"),
            "{text}"
        );
    }
}
