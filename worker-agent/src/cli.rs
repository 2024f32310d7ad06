//! Command-line flags of `jobrelay-agent`; every flag can also be set from the
//! environment.

use std::time::Duration;

/// Holds the mirror Jobs of one worker cluster on behalf of a jobrelay manager.
#[derive(Debug, clap::Parser)]
#[command(name = "jobrelay-agent", version)]
pub struct Args {
    /// The manager's Relay endpoint, e.g. `https://jobrelay-manager.jobrelay:8443`.
    #[arg(long, env = "JOBRELAY_MANAGER_URL")]
    pub manager_url: String,

    /// The WorkerCluster this agent speaks for.
    #[arg(long, env = "JOBRELAY_CLUSTER")]
    pub cluster: String,

    /// The manager's identity (its `--origin`); the agent touches only objects
    /// labelled `jobrelay.dev/origin=<this>`.
    #[arg(long, env = "JOBRELAY_ORIGIN")]
    pub origin: String,

    /// YAML configuration file (terminated-Pod lifetime); see
    /// docs/operations.md. Without it, the defaults apply.
    #[arg(long, env = "JOBRELAY_CONFIG")]
    pub config: Option<std::path::PathBuf>,

    /// How long a Pod of a deleted mirror may outlive its Job before the agent
    /// deletes it itself (e.g. Pods orphaned by an earlier delete).
    #[arg(long, env = "JOBRELAY_ORPHAN_POD_GRACE", default_value = "10s", value_parser = jobrelay_proto::duration::parse)]
    pub orphan_pod_grace: Duration,

    /// Dial the manager without TLS. For local development on loopback only.
    #[arg(long, env = "JOBRELAY_INSECURE_PLAINTEXT", value_parser = clap::builder::BoolishValueParser::new())]
    pub insecure_plaintext: bool,
}
