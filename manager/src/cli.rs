//! Command-line flags of `jobrelay-manager`; every flag can also be set from
//! the environment.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Mirrors batch/v1 Jobs from this cluster to worker clusters whose agents dial in.
#[derive(Debug, clap::Parser)]
#[command(name = "jobrelay-manager", version)]
pub struct Args {
    /// Address the Relay gRPC service listens on.
    #[arg(long, env = "JOBRELAY_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,

    /// This manager's identity, written into the `jobrelay.dev/origin` label of every mirror.
    #[arg(long, env = "JOBRELAY_ORIGIN")]
    pub origin: String,

    /// YAML configuration file (retention policies and limits).
    #[arg(long, env = "JOBRELAY_CONFIG")]
    pub config: Option<PathBuf>,

    /// Serve without TLS. For local development on loopback only.
    #[arg(long, env = "JOBRELAY_INSECURE_PLAINTEXT")]
    pub insecure_plaintext: bool,
}
