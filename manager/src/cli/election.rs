//! The flags by which the manager's replicas elect the one that works.

use std::time::Duration;

use crate::leader::decide::{Settings, SettingsError};

/// How replicas of the manager elect the one that works.
#[derive(Debug, clap::Args)]
pub struct ElectionFlags {
    /// Elect one leader among the manager's replicas on a Lease; with false
    /// this process works alone, so run exactly one replica.
    #[arg(
        long,
        env = "JOBRELAY_LEADER_ELECT",
        default_value = "true",
        action = clap::ArgAction::Set,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub leader_elect: bool,

    /// This replica's name in the Lease; every replica needs its own (in a
    /// Pod, the Pod's name). Default: the host name.
    #[arg(long, env = "JOBRELAY_IDENTITY")]
    pub identity: Option<String>,

    /// Namespace of the Lease (the manager's own).
    #[arg(long, env = "JOBRELAY_LEASE_NAMESPACE", default_value = "default")]
    pub lease_namespace: String,

    /// Name of the Lease.
    #[arg(long, env = "JOBRELAY_LEASE_NAME", default_value = "jobrelay-manager")]
    pub lease_name: String,

    /// How long a follower waits after the Lease last changed before it
    /// takes over.
    #[arg(long, env = "JOBRELAY_LEASE_DURATION", default_value = "15s", value_parser = jobrelay_proto::duration::parse)]
    pub lease_duration: Duration,

    /// How long the leader keeps working without a successful renewal;
    /// shorter than --lease-duration.
    #[arg(long, env = "JOBRELAY_RENEW_DEADLINE", default_value = "10s", value_parser = jobrelay_proto::duration::parse)]
    pub renew_deadline: Duration,

    /// How often the Lease is read and renewed; shorter than
    /// --renew-deadline.
    #[arg(long, env = "JOBRELAY_RETRY_PERIOD", default_value = "2s", value_parser = jobrelay_proto::duration::parse)]
    pub retry_period: Duration,

    /// This replica's Pod (in a Pod, from the downward API). While it leads,
    /// the replica labels it `jobrelay.dev/leader=true`, the label the
    /// Service agents dial selects. Unset: no label is written.
    #[arg(long, env = "JOBRELAY_POD_NAME")]
    pub pod_name: Option<String>,

    /// Namespace of that Pod. Default: --lease-namespace.
    #[arg(long, env = "JOBRELAY_POD_NAMESPACE")]
    pub pod_namespace: Option<String>,
}

impl ElectionFlags {
    /// The durations, checked against each other.
    pub fn settings(&self) -> Result<Settings, SettingsError> {
        Settings {
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        }
        .validated()
    }

    /// This replica's Pod as (namespace, name), if it was named.
    pub fn pod(&self) -> Option<(&str, &str)> {
        let name = self.pod_name.as_deref().filter(|n| !n.is_empty())?;
        let namespace = self
            .pod_namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(&self.lease_namespace);
        Some((namespace, name))
    }

    /// This replica's identity: `--identity`, else the host name.
    pub fn identity(&self) -> Option<String> {
        self.identity
            .clone()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .map(|name| name.trim().to_string())
            .filter(|name| !name.is_empty())
    }
}
