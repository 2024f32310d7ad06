//! Command-line flags of `jobrelay-manager`; every flag can also be set from
//! the environment.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Mirrors batch/v1 Jobs from this cluster to worker clusters whose agents dial in.
#[derive(Debug, clap::Parser)]
#[command(
    name = "jobrelay-manager",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: Args,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Print jobrelay's CustomResourceDefinitions (WorkerCluster, then
    /// WorkerClusterSet) as YAML.
    Crd,
}

/// Flags of the manager itself (no subcommand).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address the Relay gRPC service listens on (mutual TLS).
    #[arg(long, env = "JOBRELAY_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,

    /// Address of the Prometheus `/metrics` endpoint.
    #[arg(long, env = "JOBRELAY_METRICS_LISTEN", default_value = "0.0.0.0:9090")]
    pub metrics_listen: SocketAddr,

    /// This manager's identity, written into the `jobrelay.dev/origin` label of every mirror.
    #[arg(long, env = "JOBRELAY_ORIGIN", required = true)]
    pub origin: Option<String>,

    /// YAML configuration file (retention policies, deletion pace); see
    /// docs/operations.md. Without it, the defaults apply.
    #[arg(long, env = "JOBRELAY_CONFIG")]
    pub config: Option<PathBuf>,

    /// How often each side of a session sends a heartbeat (e.g. 5s); a peer
    /// silent for three intervals is dropped.
    #[arg(long, env = "JOBRELAY_HEARTBEAT_INTERVAL", default_value = "5s", value_parser = jobrelay_proto::duration::parse)]
    pub heartbeat_interval: Duration,

    /// Least time between two WorkerCluster status writes that only refresh
    /// `lastHeartbeatTime` or `activeMirrors`; a change of condition is
    /// written at once.
    #[arg(long, env = "JOBRELAY_CLUSTER_STATUS_INTERVAL", default_value = "30s", value_parser = jobrelay_proto::duration::parse)]
    pub cluster_status_interval: Duration,

    #[command(flatten)]
    pub process: jobrelay_process::ProcessFlags,

    /// CA bundle (PEM) that agents' client certificates must chain to.
    #[arg(
        long,
        env = "JOBRELAY_CLIENT_CA",
        required_unless_present = "insecure_plaintext"
    )]
    pub client_ca: Option<PathBuf>,

    /// Serve without TLS: agents are identified only by what their Hello
    /// claims. For local development on loopback only.
    #[arg(long, env = "JOBRELAY_INSECURE_PLAINTEXT", value_parser = clap::builder::BoolishValueParser::new())]
    pub insecure_plaintext: bool,
}
