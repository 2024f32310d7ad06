//! The manager's Welcome: whether this manager may command the worker, and
//! what it says of the cluster — its `fenceAfter` and its
//! `terminatingPodTimeout` — on opening and again whenever they change.

use std::time::Duration;

use jobrelay_proto::instance;
use jobrelay_proto::v1::Welcome;
use tokio::sync::watch;
use tracing::info;

use super::Agent;

impl Agent {
    /// The agent, telling `timeout` what each Welcome says of the
    /// `terminatingPodTimeout`.
    pub fn telling_stuck_pods(self, timeout: watch::Sender<Option<Duration>>) -> Agent {
        Agent {
            terminating_pod_timeout: timeout,
            ..self
        }
    }

    /// Takes the manager's Welcome, or says why this manager may not
    /// command the worker: another origin, a stale leader, another instance.
    pub(super) fn welcomed(&mut self, welcome: &Welcome) -> Result<(), String> {
        if welcome.origin != self.origin {
            return Err(format!(
                "the manager's origin is {:?}, this agent serves {:?}",
                welcome.origin, self.origin
            ));
        }
        self.epochs
            .welcomed(&welcome.leader_lease, welcome.leader_epoch)?;
        let held = self.mirrors.manager_instances();
        instance::judge(&welcome.manager_instance, &held, &self.adopted_instance)?;
        info!(manager_version = %welcome.manager_version, leader_epoch = welcome.leader_epoch, manager_instance = %welcome.manager_instance, "welcomed by the manager");
        self.mirrors.set_instance(&welcome.manager_instance);
        self.heard_again(set(welcome.fence_after));
        let terminating_pod_timeout = set(welcome.terminating_pod_timeout);
        self.terminating_pod_timeout
            .send_if_modified(|told| std::mem::replace(told, terminating_pod_timeout) != *told);
        self.connected.send_replace(true);
        Ok(())
    }
}

/// A duration the Welcome sets: `None` when absent, zero or negative.
fn set(duration: Option<prost_types::Duration>) -> Option<Duration> {
    duration
        .and_then(|d| Duration::try_from(d).ok())
        .filter(|d| !d.is_zero())
}
