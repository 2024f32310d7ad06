//! Command-line flags of `jobrelay-manager`; every flag can also be set from
//! the environment.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use jobrelay_process::flags::listen_address;

use crate::reason::JobEvents;

mod election;
mod visibility;
mod webhook;
pub use election::ElectionFlags;
pub use visibility::VisibilityFlags;
pub use webhook::{WebhookCertificate, WebhookFlags};

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
    #[arg(long, env = "JOBRELAY_LISTEN", default_value = "0.0.0.0:8443", value_parser = listen_address)]
    pub listen: SocketAddr,

    /// Address of the Prometheus `/metrics` endpoint (plaintext HTTP).
    #[arg(
        long = "metrics-bind-address",
        visible_alias = "metrics-listen",
        env = "JOBRELAY_METRICS_LISTEN",
        default_value = "0.0.0.0:9090",
        value_parser = listen_address
    )]
    pub metrics_listen: SocketAddr,

    /// Keep the latency histograms (dispatch, status, cleanup) by cluster:
    /// 27 series per histogram and cluster. Off, they are fleet-wide and a
    /// cluster costs a dozen series or fewer.
    #[arg(long, env = "JOBRELAY_METRICS_PER_CLUSTER_LATENCIES", value_parser = clap::builder::BoolishValueParser::new())]
    pub metrics_per_cluster_latencies: bool,

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

    /// WorkerCluster status writes per second, across the fleet, that only
    /// refresh `lastHeartbeatTime` or `activeMirrors` (a large fleet then
    /// refreshes each cluster less often than the interval); 0 for no
    /// limit. A change of condition is written at once regardless.
    #[arg(long, env = "JOBRELAY_CLUSTER_STATUS_WRITES_PER_SECOND", default_value = "10", value_parser = writes_per_second)]
    pub cluster_status_writes_per_second: f64,

    /// Put the node labels and tolerations of a Job's Kueue ResourceFlavors
    /// on its mirror too (created suspended with them before admission), for
    /// fleets whose flavors name worker node pools. Default: flavors are
    /// quota on the manager, and the mirror carries none of what they add.
    #[arg(
        long,
        env = "JOBRELAY_KUEUE_FLAVORS_ON_MIRRORS",
        default_value = "false",
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub kueue_flavors_on_mirrors: bool,

    /// Which Events to record on the Jobs relayed: `steps` (where each Job
    /// went, how it ended there, that its remote cleanup began and was
    /// confirmed) or `problems` (refusals, losses, failures and withdrawals
    /// only, which are recorded either way).
    #[arg(long, env = "JOBRELAY_JOB_EVENTS", value_enum, default_value_t = JobEvents::Steps)]
    pub job_events: JobEvents,

    /// Secret, in --lease-namespace, holding the key that seals where each
    /// Job runs (made by the manager if missing): a record without a valid
    /// seal never places or moves a Job.
    #[arg(
        long,
        env = "JOBRELAY_PLACEMENT_KEY_SECRET",
        default_value = "jobrelay-placement-key"
    )]
    pub placement_key_secret: String,

    #[command(flatten)]
    pub process: jobrelay_process::ProcessFlags,

    #[command(flatten)]
    pub election: ElectionFlags,

    #[command(flatten)]
    pub relay: RelayFlags,

    #[command(flatten)]
    pub webhook: WebhookFlags,

    #[command(flatten)]
    pub visibility: VisibilityFlags,

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

/// What one peer of the Relay may hold; see docs/security.md.
#[derive(Debug, clap::Args)]
pub struct RelayFlags {
    /// Connections the Relay holds open at once, handshaking or not; beyond
    /// it a new connection is closed at once. Room for every agent, twice.
    #[arg(long, env = "JOBRELAY_RELAY_MAX_CONNECTIONS", default_value = "512", value_parser = clap::value_parser!(u32).range(1..))]
    pub relay_max_connections: u32,

    /// TLS handshakes in flight at once; beyond it a new connection is
    /// closed at once.
    #[arg(long, env = "JOBRELAY_RELAY_MAX_HANDSHAKES", default_value = "64", value_parser = clap::value_parser!(u32).range(1..))]
    pub relay_max_handshakes: u32,

    /// How long an agent has to say Hello once its stream is open.
    #[arg(long, env = "JOBRELAY_RELAY_HELLO_TIMEOUT", default_value = "5s", value_parser = jobrelay_proto::duration::parse)]
    pub relay_hello_timeout: Duration,

    /// Messages queued for one agent; an agent that falls this far behind
    /// is disconnected and resyncs when it dials again.
    #[arg(long, env = "JOBRELAY_RELAY_OUTBOX_LIMIT", default_value = "4096", value_parser = clap::value_parser!(u32).range(1..))]
    pub relay_outbox_limit: u32,

    /// Messages a second one session may send, 20 seconds' worth at once;
    /// an agent that sends more is disconnected, and its WorkerCluster says
    /// why. 0: no limit.
    #[arg(long, env = "JOBRELAY_RELAY_SESSION_MESSAGES_PER_SECOND", default_value_t = crate::session::budget::DEFAULT_MESSAGES_PER_SECOND)]
    pub relay_session_messages_per_second: u32,

    /// Bytes a second one session may send, encoded, 20 seconds' worth at
    /// once; as above. 0: no limit.
    #[arg(long, env = "JOBRELAY_RELAY_SESSION_BYTES_PER_SECOND", default_value_t = crate::session::budget::DEFAULT_BYTES_PER_SECOND)]
    pub relay_session_bytes_per_second: u32,
}

impl RelayFlags {
    /// What the listener lets unauthenticated peers hold.
    pub fn connection_limits(&self) -> jobrelay_process::ConnectionLimits {
        jobrelay_process::ConnectionLimits {
            max_connections: self.relay_max_connections as usize,
            max_handshakes: self.relay_max_handshakes as usize,
            ..Default::default()
        }
    }

    /// What one session may hold.
    pub fn session_limits(&self) -> crate::session::SessionLimits {
        crate::session::SessionLimits {
            hello_timeout: self.relay_hello_timeout,
            outbox_capacity: self.relay_outbox_limit as usize,
            rates: crate::session::budget::Rates {
                messages: self.relay_session_messages_per_second,
                bytes: self.relay_session_bytes_per_second,
            },
        }
    }
}

/// A budget of writes per second: a number, 0 or more.
fn writes_per_second(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if rate >= 0.0 && rate.is_finite() => Ok(rate),
        _ => Err(format!(
            "{text:?} is not a number of writes per second (0 or more)"
        )),
    }
}

/// The flags of a manager given `args` beside the least it needs, for the
/// tests of the flags.
#[cfg(test)]
pub(crate) fn parse(args: &[&str]) -> Args {
    use clap::Parser;
    let base = ["jobrelay-manager", "--origin", "o", "--insecure-plaintext"];
    Cli::try_parse_from(base.iter().chain(args))
        .expect("valid flags")
        .run
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::leader::decide::Settings;

    #[test]
    fn election_defaults_are_kubernetes_controllers_and_identity_is_taken_as_given() {
        let args = parse(&["--identity", "manager-0"]);
        assert!(args.election.leader_elect);
        assert_eq!(args.election.settings(), Ok(Settings::default()));
        assert_eq!(args.election.identity().as_deref(), Some("manager-0"));
        assert!(!parse(&["--leader-elect", "false"]).election.leader_elect);
    }

    #[test]
    fn the_pod_to_label_is_named_or_absent_and_defaults_to_the_lease_namespace() {
        assert_eq!(parse(&[]).election.pod(), None);
        let args = parse(&["--pod-name", "m-0", "--lease-namespace", "jr"]);
        assert_eq!(args.election.pod(), Some(("jr", "m-0")));
        let args = parse(&["--pod-name", "m-0", "--pod-namespace", "other"]);
        assert_eq!(args.election.pod(), Some(("other", "m-0")));
    }

    #[test]
    fn kueue_flavors_stay_off_mirrors_unless_opted_in() {
        assert!(!parse(&[]).kueue_flavors_on_mirrors);
        assert!(parse(&["--kueue-flavors-on-mirrors"]).kueue_flavors_on_mirrors);
        assert!(parse(&["--kueue-flavors-on-mirrors=true"]).kueue_flavors_on_mirrors);
        assert!(!parse(&["--kueue-flavors-on-mirrors=false"]).kueue_flavors_on_mirrors);
    }

    #[test]
    fn the_metrics_address_takes_the_controller_name_and_the_old_one() {
        let addr: SocketAddr = "127.0.0.1:9100".parse().expect("an address");
        for flag in ["--metrics-bind-address", "--metrics-listen"] {
            assert_eq!(
                parse(&[flag, "127.0.0.1:9100"]).metrics_listen,
                addr,
                "{flag}"
            );
        }
        let defaults = parse(&[]);
        assert_eq!(defaults.metrics_listen.port(), 9090);
        assert_eq!(defaults.process.kubeconfig, None);
        let args = parse(&[
            "--kubeconfig",
            "/etc/manager.kubeconfig",
            "--log-format",
            "json",
        ]);
        assert_eq!(
            args.process.kubeconfig,
            Some(PathBuf::from("/etc/manager.kubeconfig"))
        );
        assert_eq!(
            args.process.log_format,
            jobrelay_process::telemetry::LogFormat::Json
        );
    }

    #[test]
    fn election_durations_that_cannot_work_together_are_refused_by_flag() {
        let args = parse(&["--lease-duration", "5s", "--renew-deadline", "10s"]);
        let error = args
            .election
            .settings()
            .expect_err("lease shorter than deadline");
        assert!(
            error.to_string().contains("--lease-duration (5s)"),
            "{error}"
        );
        let error = Cli::try_parse_from([
            "jobrelay-manager",
            "--origin",
            "o",
            "--insecure-plaintext",
            "--retry-period",
            "soon",
        ])
        .expect_err("not a duration");
        assert!(error.to_string().contains("--retry-period"), "{error}");
    }

    #[test]
    fn a_negative_status_write_budget_is_refused_by_flag() {
        let args = parse(&["--cluster-status-writes-per-second", "2.5"]);
        assert_eq!(args.cluster_status_writes_per_second, 2.5);
        assert_eq!(parse(&[]).cluster_status_writes_per_second, 10.0);
        let error = Cli::try_parse_from([
            "jobrelay-manager",
            "--origin",
            "o",
            "--insecure-plaintext",
            "--cluster-status-writes-per-second=-1",
        ])
        .expect_err("negative");
        assert!(
            error
                .to_string()
                .contains("--cluster-status-writes-per-second"),
            "{error}"
        );
    }
}
