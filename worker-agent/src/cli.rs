//! Command-line flags of `jobrelay-agent`; every flag can also be set from the
//! environment.

use std::path::PathBuf;
use std::time::Duration;

/// Holds the mirror Jobs of one worker cluster on behalf of a jobrelay manager.
#[derive(Debug, clap::Parser)]
#[command(name = "jobrelay-agent", version)]
pub struct Args {
    /// The manager's Relay endpoint, e.g. `https://jobrelay-manager.jobrelay:8443`;
    /// or several, comma-separated, one per manager replica: each new session
    /// is sought at the next (a follower does not serve).
    #[arg(
        long,
        env = "JOBRELAY_MANAGER_URL",
        required = true,
        value_delimiter = ','
    )]
    pub manager_url: Vec<String>,

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

    /// How long a Pod of a deleted or lost mirror may outlive its Job (or a
    /// Pod of a live mirror go unowned by it) before the agent deletes it.
    #[arg(long, env = "JOBRELAY_ORPHAN_POD_GRACE", default_value = "10s", value_parser = jobrelay_proto::duration::parse)]
    pub orphan_pod_grace: Duration,

    /// The longest wait between two tries of a mirror the worker refused for
    /// a reason that can clear (namespace missing, quota, webhook denial, API
    /// server trouble); tries start 1s apart and double, with jitter.
    #[arg(long, env = "JOBRELAY_APPLY_RETRY_MAX_DELAY", default_value = "5m", value_parser = jobrelay_proto::duration::parse)]
    pub apply_retry_max_delay: Duration,

    /// How long the agent may hear no manager before it fences (suspends every
    /// mirror that may run Pods), until a manager's Welcome gives the
    /// WorkerCluster's own `fenceAfter`: what an agent started while cut off
    /// goes by. Keep it at most the cluster's `fenceAfter`.
    #[arg(long, env = "JOBRELAY_FENCE_AFTER", default_value = "13m", value_parser = jobrelay_proto::duration::parse)]
    pub fence_after: Duration,

    /// How often everything of this origin that the manager does not want is
    /// looked for and deleted (also done on every DesiredSet).
    #[arg(long, env = "JOBRELAY_ORPHAN_SWEEP_INTERVAL", default_value = "60s", value_parser = jobrelay_proto::duration::parse)]
    pub orphan_sweep_interval: Duration,

    /// The brake on mass deletion: a DesiredSet whose orphans unknown to the
    /// manager exceed this share (0 to 1) of the live mirrors, and number at
    /// least `--deletion-brake-minimum`, deletes none of them until the same
    /// holds for `--deletion-brake-confirm`. 1 turns the brake off.
    #[arg(long, env = "JOBRELAY_DELETION_BRAKE_SHARE", default_value_t = 0.5, value_parser = share)]
    pub deletion_brake_share: f64,

    /// Unknown orphans below this many never trip the brake.
    #[arg(long, env = "JOBRELAY_DELETION_BRAKE_MINIMUM", default_value_t = 20)]
    pub deletion_brake_minimum: usize,

    /// How long the brake holds before the deletions go ahead.
    #[arg(long, env = "JOBRELAY_DELETION_BRAKE_CONFIRM", default_value = "5m", value_parser = jobrelay_proto::duration::parse)]
    pub deletion_brake_confirm: Duration,

    /// A manager instance (the UID of its cluster's kube-system namespace)
    /// to accept although this worker holds mirrors another instance of the
    /// same origin made: set it when a manager was rebuilt or moved on
    /// purpose. Its DesiredSet then replaces the old instance's.
    #[arg(long, env = "JOBRELAY_ADOPT_MANAGER_INSTANCE", default_value = "")]
    pub adopt_manager_instance: String,

    /// Deletions (of Jobs and Pods) the agent sends per second at most; a
    /// backlog is worked off at this pace, with progress in the log.
    #[arg(long, env = "JOBRELAY_DELETIONS_PER_SECOND", default_value_t = 100)]
    pub deletions_per_second: u32,

    /// Report the worker's room (what its schedulable nodes have left for
    /// Pods, by node pool) to the manager, from watches of every Node and of
    /// the bound, non-terminal Pods of every namespace. `false`: no such
    /// watch, no report; the manager then places on this cluster without
    /// asking whether Pods fit.
    #[arg(
        long,
        env = "JOBRELAY_ROOM",
        default_value_t = true,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub room: bool,

    /// Tell the manager the worker's Warning Events about the mirrors and
    /// their Pods (FailedScheduling, FailedMount, BackOff, FailedCreate, …),
    /// from a watch of Warning Events within the namespace policy, so that
    /// the manager Job shows them. `false`: no such watch.
    #[arg(
        long,
        env = "JOBRELAY_WORKER_EVENTS",
        default_value_t = true,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub worker_events: bool,

    /// With the room, report what the worker's own Kueue has free, by
    /// ClusterQueue, from watches of its ClusterQueues and LocalQueues: the
    /// manager then places a Job queued in that Kueue (WorkerCluster
    /// `spec.kueue`) only where its ClusterQueue has quota for it.
    #[arg(
        long,
        env = "JOBRELAY_ROOM_KUEUE",
        default_value_t = false,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub room_kueue: bool,

    /// The least time between two room reports on a session: a room that
    /// changes more often is sent as it is when the interval is up; a room
    /// that grew (Jobs may wait for it), when a tenth of it is up.
    #[arg(long, env = "JOBRELAY_ROOM_INTERVAL", default_value = "2s", value_parser = jobrelay_proto::duration::parse)]
    pub room_interval: Duration,

    /// Address of the Prometheus `/metrics` endpoint (plaintext HTTP).
    #[arg(
        long = "metrics-bind-address",
        visible_alias = "metrics-listen",
        env = "JOBRELAY_METRICS_LISTEN",
        default_value = "0.0.0.0:9090",
        value_parser = jobrelay_process::flags::listen_address
    )]
    pub metrics_listen: std::net::SocketAddr,

    #[command(flatten)]
    pub process: jobrelay_process::ProcessFlags,

    /// The agent's own namespace on the worker (its Secret and token live
    /// there): never open to mirrors, whatever the namespace policy says.
    #[arg(long, env = "JOBRELAY_POD_NAMESPACE")]
    pub own_namespace: Option<String>,

    /// The CA (PEM) that signed the manager's server certificate.
    #[arg(
        long,
        env = "JOBRELAY_MANAGER_CA",
        required_unless_present = "insecure_plaintext"
    )]
    pub manager_ca: Option<PathBuf>,

    /// Dial the manager without TLS. For local development on loopback only.
    #[arg(long, env = "JOBRELAY_INSECURE_PLAINTEXT", value_parser = clap::builder::BoolishValueParser::new())]
    pub insecure_plaintext: bool,
}

/// A share from 0 to 1.
fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(share) if (0.0..=1.0).contains(&share) => Ok(share),
        _ => Err(format!("{text:?} is not a share from 0 to 1 (such as 0.5)")),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use clap::Parser;

    use super::*;

    fn parse(args: &[&str]) -> Args {
        let base = [
            "jobrelay-agent",
            "--manager-url",
            "http://127.0.0.1:8443",
            "--cluster",
            "worker-a",
            "--origin",
            "east",
            "--insecure-plaintext",
        ];
        Args::try_parse_from(base.iter().chain(args)).expect("valid flags")
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
        assert_eq!(
            defaults.metrics_listen,
            "0.0.0.0:9090".parse().expect("an address")
        );
    }

    #[test]
    fn room_reports_are_on_every_two_seconds_unless_turned_off() {
        let defaults = parse(&[]);
        assert!(defaults.room);
        assert_eq!(defaults.room_interval, Duration::from_secs(2));
        assert!(!parse(&["--room=false"]).room);
        assert!(!parse(&["--room", "false"]).room);
        assert!(parse(&["--room"]).room);
        assert!(
            !defaults.room_kueue,
            "the worker's Kueue is read only when asked"
        );
        assert!(parse(&["--room-kueue"]).room_kueue);
        assert_eq!(
            parse(&["--room-interval", "10s"]).room_interval,
            Duration::from_secs(10)
        );
    }

    #[test]
    fn the_kubeconfig_and_the_log_format_are_the_process_flags() {
        let defaults = parse(&[]);
        assert_eq!(defaults.process.kubeconfig, None);
        assert_eq!(
            defaults.process.log_format,
            jobrelay_process::telemetry::LogFormat::Text
        );
        let args = parse(&[
            "--kubeconfig",
            "/etc/worker.kubeconfig",
            "--log-format=json",
        ]);
        assert_eq!(
            args.process.kubeconfig,
            Some(PathBuf::from("/etc/worker.kubeconfig"))
        );
        assert_eq!(
            args.process.log_format,
            jobrelay_process::telemetry::LogFormat::Json
        );
    }
}
