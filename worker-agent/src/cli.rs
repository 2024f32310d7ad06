//! Command-line flags of `jobrelay-agent`; every flag can also be set from the
//! environment.

use std::path::PathBuf;

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

    /// YAML configuration file (terminated-Pod lifetime, sweep interval).
    #[arg(long, env = "JOBRELAY_CONFIG")]
    pub config: Option<PathBuf>,

    /// Dial the manager without TLS. For local development on loopback only.
    #[arg(long, env = "JOBRELAY_INSECURE_PLAINTEXT")]
    pub insecure_plaintext: bool,
}
