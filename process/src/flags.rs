//! The certificate flags both binaries take, and the files they name.

use std::path::PathBuf;
use std::time::Duration;

use crate::Error;
use crate::files::PemFiles;

#[derive(Debug, Clone, clap::Args)]
pub struct CertificateFlags {
    /// This side's certificate (PEM, may hold the chain): the manager's
    /// serving certificate, or the agent's client certificate, whose DNS
    /// subject alternative name is its cluster.
    #[arg(
        long,
        env = "JOBRELAY_TLS_CERT",
        required_unless_present = "insecure_plaintext"
    )]
    pub tls_cert: Option<PathBuf>,

    /// The private key of `--tls-cert` (PEM).
    #[arg(
        long,
        env = "JOBRELAY_TLS_KEY",
        required_unless_present = "insecure_plaintext"
    )]
    pub tls_key: Option<PathBuf>,

    /// How often the certificate files are checked for changes; changed
    /// files are loaded without a restart.
    #[arg(long, env = "JOBRELAY_CERTIFICATE_RELOAD_INTERVAL", default_value = "10s", value_parser = jobrelay_proto::duration::parse)]
    pub certificate_reload_interval: Duration,
}

impl CertificateFlags {
    /// The files to read, with the CA file `ca` that `ca_flag` named; `None`
    /// when `insecure_plaintext` turns TLS off.
    pub fn files(
        &self,
        ca: Option<&PathBuf>,
        ca_flag: &'static str,
        insecure_plaintext: bool,
    ) -> Result<Option<PemFiles>, Error> {
        if insecure_plaintext {
            tracing::warn!(
                "--insecure-plaintext: no TLS, the peer is not authenticated; for loopback development only"
            );
            return Ok(None);
        }
        match (&self.tls_cert, &self.tls_key, ca) {
            (Some(cert), Some(key), Some(ca)) => Ok(Some(PemFiles {
                cert: cert.clone(),
                key: key.clone(),
                ca: ca.clone(),
                ca_flag,
            })),
            _ => Err(Error::Config(format!(
                "--tls-cert, --tls-key and {ca_flag} are required (or --insecure-plaintext for loopback development)"
            ))),
        }
    }
}

/// The flags every jobrelay process has: its certificates, the limit of its
/// Kubernetes client, and where its health endpoint listens.
#[derive(Debug, Clone, clap::Args)]
pub struct ProcessFlags {
    #[command(flatten)]
    pub certificates: CertificateFlags,

    #[command(flatten)]
    pub kube_api: crate::KubeApiFlags,

    /// Address of the plaintext `grpc.health.v1.Health` service for
    /// Kubernetes `grpc:` probes: service "" is SERVING while the process
    /// runs, "jobrelay.v1.Relay" while it can do its work (the manager: its
    /// caches are synced; the agent: it holds a session and reaches its own
    /// API server).
    #[arg(long, env = "JOBRELAY_HEALTH_LISTEN", default_value = "0.0.0.0:8081")]
    pub health_listen: std::net::SocketAddr,
}
