//! Logging for both binaries: to standard error, levels from `RUST_LOG`
//! (default `info,kube=warn`), as text (colours only on a terminal) or as
//! one JSON object per line (`--log-format json`) for log collectors.

use tracing::Subscriber;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::util::SubscriberInitExt;

use crate::log_line::FlatJson;

/// The filter when `RUST_LOG` is unset or unreadable.
const DEFAULT_FILTER: &str = "info,kube=warn";

/// How each log line is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines: time, level, spans, message, fields.
    #[default]
    Text,
    /// One flat JSON object per line: `ts`, `level`, `msg`, the event's and
    /// its spans' fields, `span` and `target` ([`crate::log_line`]).
    Json,
}

/// Installs the process's tracing subscriber (and forwards `log` records
/// to it); call once, in `main`, right after the flags are parsed.
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    subscriber(format, filter, std::io::stderr, ansi).init();
}

/// The subscriber writing `format` lines that pass `filter` to `writer`.
fn subscriber<W>(
    format: LogFormat,
    filter: EnvFilter,
    writer: W,
    ansi: bool,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_env_filter(filter);
    match format {
        LogFormat::Text => Box::new(builder.with_ansi(ansi).finish()),
        LogFormat::Json => Box::new(
            builder
                .fmt_fields(FlatJson::fields())
                .event_format(FlatJson)
                .finish(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex, PoisonError};

    use super::*;

    /// Log output kept in memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner))
                .into_owned()
        }
    }

    fn logged(format: LogFormat) -> String {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = subscriber(
            format,
            EnvFilter::new("info"),
            move || writer.clone(),
            false,
        );
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("reconcile", job = "ml/train");
            let _entered = span.enter();
            tracing::info!(cluster = "worker-a", "sent to cluster");
            tracing::debug!("filtered out");
        });
        captured.text()
    }

    #[test]
    fn json_is_one_flat_object_per_line_with_the_span_and_its_fields() {
        let text = logged(LogFormat::Json);
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).expect("each line is a JSON object"))
            .collect();
        assert_eq!(lines.len(), 1, "one event passes the filter: {text}");
        let line = &lines[0];
        assert_eq!(line["level"], "info");
        assert_eq!(line["msg"], "sent to cluster");
        assert_eq!(line["cluster"], "worker-a");
        assert_eq!(line["job"], "ml/train", "the span's field, flat");
        assert_eq!(line["span"], "reconcile");
        assert!(
            line["ts"].as_str().is_some_and(|ts| ts.ends_with('Z')),
            "{line}"
        );
        assert!(
            line["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("jobrelay_process")),
            "{line}"
        );
    }

    #[test]
    fn text_is_what_it_always_was() {
        let text = logged(LogFormat::Text);
        assert!(
            text.contains("INFO reconcile{job=\"ml/train\"}: ")
                && text.contains("sent to cluster cluster=\"worker-a\""),
            "{text}"
        );
        assert!(!text.contains("filtered out"), "{text}");
    }
}
