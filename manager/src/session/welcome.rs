//! The Welcome a session opens with, and again whenever what it tells of
//! the cluster changes: the agent learns its `fenceAfter` and
//! `terminatingPodTimeout` from it, so an operator's change reaches an
//! agent that is connected.

use std::sync::Arc;

use jobrelay_proto::v1::Welcome;
use jobrelay_proto::v1::manager_message::Kind;
use tokio::sync::watch;
use tracing::{info, warn};

use super::Sessions;
use crate::clusters::fencing;
use crate::fleet::message;
use crate::outbox::{Delivery, Outbox};

impl Sessions {
    /// The Welcome for `cluster`'s agent, as this replica leads now.
    pub(super) fn welcome(&self, cluster: &str) -> Welcome {
        let epoch = self.epoch.borrow().clone();
        Welcome {
            heartbeat_interval: prost_types::Duration::try_from(self.heartbeat_interval).ok(),
            manager_version: env!("CARGO_PKG_VERSION").into(),
            origin: self.origin.clone(),
            leader_lease: epoch.lease,
            leader_epoch: epoch.transitions,
            manager_instance: self.instance.clone(),
            fence_after: self.fence_after(cluster),
            terminating_pod_timeout: self.terminating_pod_timeout(cluster),
        }
    }

    /// The cluster's `terminatingPodTimeout`; none when absent or refused
    /// (the API server refuses such a spec when it is written).
    fn terminating_pod_timeout(&self, cluster: &str) -> Option<prost_types::Duration> {
        let timeout = self.registry.get(cluster)?.terminating_pod_timeout();
        let timeout = timeout.unwrap_or_else(|error| {
            warn!(%error, "forcing no stuck Pod");
            None
        })?;
        prost_types::Duration::try_from(timeout).ok()
    }

    /// What the Welcome tells of the cluster's spec, to see it change.
    fn told(&self, cluster: &str) -> Told {
        (
            self.fence_after(cluster),
            self.terminating_pod_timeout(cluster),
        )
    }

    /// How long the cluster's agent may hear no manager before it fences:
    /// its spec's `fenceAfter`, or the default for its `lostAfter` (the
    /// defaults when the spec is refused; the API server refuses such a
    /// spec when it is written).
    fn fence_after(&self, cluster: &str) -> Option<prost_types::Duration> {
        let fencing = self.registry.get(cluster).map(|wc| {
            wc.fencing().unwrap_or_else(|error| {
                warn!(%error, "using the default fencing");
                fencing::DEFAULT
            })
        })?;
        prost_types::Duration::try_from(fencing.fence_after).ok()
    }

    /// Welcomes the agent again whenever what the Welcome tells of its
    /// WorkerCluster changes, until the session's outbox closes.
    pub(super) async fn keep_welcome_current(
        self: Arc<Self>,
        cluster: String,
        mut clusters_changed: watch::Receiver<()>,
        outbox: Outbox,
    ) {
        let mut told = self.told(&cluster);
        while clusters_changed.changed().await.is_ok() {
            let now = self.told(&cluster);
            if now == told {
                continue;
            }
            info!(fence_after = ?now.0, terminating_pod_timeout = ?now.1, "the cluster's spec changed what its agent is told; welcoming it again");
            if outbox.send(message(Kind::Welcome(self.welcome(&cluster)))) == Delivery::Closed {
                return;
            }
            told = now;
        }
    }
}

/// `fenceAfter` and `terminatingPodTimeout`, as a Welcome carries them.
type Told = (Option<prost_types::Duration>, Option<prost_types::Duration>);
