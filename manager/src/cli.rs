//! Command-line flags of `jobrelay-manager`; every flag can also be set from
//! the environment.

use std::net::SocketAddr;
use std::time::Duration;

/// Mirrors batch/v1 Jobs from this cluster to worker clusters whose agents dial in.
#[derive(Debug, clap::Parser)]
#[command(name = "jobrelay-manager", version)]
pub struct Args {
    /// Address the Relay gRPC service listens on.
    #[arg(long, env = "JOBRELAY_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,

    /// Address of the Prometheus `/metrics` endpoint.
    #[arg(long, env = "JOBRELAY_METRICS_LISTEN", default_value = "0.0.0.0:9090")]
    pub metrics_listen: SocketAddr,

    /// This manager's identity, written into the `jobrelay.dev/origin` label of every mirror.
    #[arg(long, env = "JOBRELAY_ORIGIN")]
    pub origin: String,

    /// YAML configuration file (retention policies, deletion pace); see
    /// docs/operations.md. Without it, the defaults apply.
    #[arg(long, env = "JOBRELAY_CONFIG")]
    pub config: Option<std::path::PathBuf>,

    /// How often each side of a session sends a heartbeat (e.g. 5s); a peer
    /// silent for three intervals is dropped.
    #[arg(long, env = "JOBRELAY_HEARTBEAT_INTERVAL", default_value = "5s", value_parser = jobrelay_proto::duration::parse)]
    pub heartbeat_interval: Duration,

    /// Serve without TLS. For local development on loopback only.
    #[arg(long, env = "JOBRELAY_INSECURE_PLAINTEXT", value_parser = clap::builder::BoolishValueParser::new())]
    pub insecure_plaintext: bool,
}
