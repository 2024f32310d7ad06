//! The process both jobrelay binaries run in: how each proves who it is,
//! says it is healthy, logs, stops, and talks to its own API server. No Job
//! logic lives here.
//!
//! Mutual TLS: the manager accepts only agents whose client certificate
//! chains to its CA and is made for client authentication — judged inside
//! the handshake, within limits on connections and handshakes — and learns
//! each agent's identity from the certificate's subject alternative names; the agent verifies the manager's certificate
//! against the CA it was given. Both read their certificates from PEM files
//! and load them again when the files change, so a mounted Secret can be
//! rotated without a restart.
//!
//! An HTTPS endpoint without client certificates ([`serving`]) serves the
//! manager's admission webhook, with the same reloading.
//!
//! Also the plaintext `grpc.health.v1.Health` endpoint for Kubernetes probes,
//! the `/metrics` endpoint and the metrics every process has (build,
//! certificate expiry, Kubernetes API latencies, and the standard `process_*`
//! ones), the one shutdown every
//! part of a process waits on, logging, the Kubernetes client with its rate
//! limit (the one token bucket every write budget uses), how long a
//! Kubernetes watch may run, and what a watch cache keeps of an object.

pub mod cache;
pub mod client;
pub mod client_cert;
pub mod config_file;
pub mod error;
pub mod fence;
pub mod files;
pub mod flags;
pub mod health;
pub mod heartbeat;
pub mod kube_api_timing;
pub mod kube_client;
pub mod log_line;
pub mod metrics;
pub mod metrics_server;
pub mod os_metrics;
pub mod peer_certificate;
pub mod rate;
pub mod server;
pub mod serving;
pub mod shutdown;
pub mod tasks;
pub mod telemetry;

pub use client_cert::CertificateRefusal;
pub use error::Error;
pub use fence::Fence;
pub use files::{Pem, PemFiles};
pub use flags::{CertificateFlags, ProcessFlags};
pub use kube_client::KubeApiFlags;
pub use peer_certificate::PeerCertificate;
pub use rate::{RateLimit, SharedBucket, TokenBucket};
pub use server::{ConnectionLimits, Peer, RefusedConnection, ServerTls};
pub use serving::{ServingFiles, ServingTls};
pub use shutdown::Shutdown;
pub use tasks::Tasks;

/// Each Kubernetes watch of either binary ends after this long and is
/// resumed from the last resource version (bookmarks keep that fresh); a
/// watch silent for longer (plus a few seconds) counts as dead and is
/// re-established.
pub const WATCH_TIMEOUT_SECS: u32 = 60;

/// The cryptography every TLS configuration of jobrelay uses.
fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}
