//! Why a session ended, or never opened, as the agent logs it before it
//! dials again.

use std::time::Duration;

/// Why a session ended, or never opened.
#[derive(Debug, thiserror::Error)]
pub enum Ended {
    #[error("{0}")]
    NoEndpoint(String),
    #[error("cannot reach the manager: {0}")]
    Unreachable(String),
    #[error("no connection within {0:?}")]
    NoConnection(Duration),
    #[error("no answer to Hello within {0:?}")]
    NoAnswer(Duration),
    #[error("the manager refused the session: {:?}: {}", .0.code(), .0.message())]
    Refused(tonic::Status),
    /// This manager may not command the worker: another origin, a stale
    /// leader, another installation.
    #[error("{0}")]
    Unwelcome(String),
    #[error("the manager closed the session")]
    Closed,
    #[error("stream error: {0}")]
    Stream(tonic::Status),
    #[error("the session's reader stopped")]
    ReaderStopped,
    #[error("the outbound stream closed")]
    OutboundClosed,
    #[error("the certificate files changed; reconnecting with them")]
    CertificatesChanged,
    #[error("the manager was silent for {0:?}")]
    Silent(Duration),
    #[error("no manager heard for fenceAfter; the mirrors are fenced")]
    Fenced,
}

/// An error with its sources, which is where TLS and connection errors say
/// what went wrong.
pub(super) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
