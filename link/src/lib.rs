//! What both ends of the Relay share beyond the wire.
//!
//! Mutual TLS: the manager accepts only agents whose client certificate
//! chains to its CA and learns each agent's identity from the certificate's
//! subject alternative names; the agent verifies the manager's certificate
//! against the CA it was given. Both read their certificates from PEM files
//! and load them again when the files change, so a mounted Secret can be
//! rotated without a restart.
//!
//! Also the plaintext `grpc.health.v1.Health` endpoint for Kubernetes probes,
//! the shutdown signal, the Kubernetes client with its rate limit, and how
//! long a Kubernetes watch may run.

pub mod client;
pub mod files;
pub mod flags;
pub mod health;
pub mod kube_client;
pub mod server;
pub mod shutdown;
pub mod telemetry;

pub use files::{Error, Pem, PemFiles};
pub use flags::CertificateFlags;
pub use kube_client::{KubeApiFlags, RateLimit, TokenBucket};
pub use server::{CertificateRefusal, Peer, PeerIdentity, ServerTls};
pub use shutdown::Shutdown;

/// Each Kubernetes watch of either binary ends after this long and is
/// resumed from the last resource version (bookmarks keep that fresh); a
/// watch silent for longer (plus a few seconds) counts as dead and is
/// re-established.
pub const WATCH_TIMEOUT_SECS: u32 = 60;

/// The cryptography every TLS configuration of jobrelay uses.
fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}
