//! The mirrors' Pods held Terminating on a node that is not Ready, as the
//! sweep of stuck Pods ([`crate::stuck_pods`]) publishes them: a PodsHeld
//! is sent for each mirror whose held Pods differ from what the session was
//! told, with none once none is held.

use std::sync::Arc;

use jobrelay_proto::v1::{AgentMessage, PodsHeld, agent_message::Kind};
use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;

use super::{Mirrors, agent_message};
use crate::stuck_pods::{self, HeldPods};

impl Mirrors {
    /// Reports the mirrors' Pods held Terminating on a node not Ready, as
    /// `held` publishes them.
    pub fn watch_held_pods(&mut self, held: watch::Receiver<Arc<HeldPods>>) {
        self.held = held;
    }

    /// Tells, into `out`, each mirror whose held Pods changed since the
    /// session was last told.
    pub(super) fn report_held(&mut self, out: &mut Vec<AgentMessage>) {
        let held = Arc::clone(&self.held.borrow());
        let now = Timestamp::now();
        for uid in stuck_pods::changed(&self.held_told, &held) {
            let pods = held.get(&uid).cloned().unwrap_or_default();
            out.push(agent_message(Kind::PodsHeld(PodsHeld {
                origin_uid: uid.clone(),
                pods: pods.iter().map(|p| p.report(now)).collect(),
            })));
            match pods.is_empty() {
                true => self.held_told.remove(&uid),
                false => self.held_told.insert(uid, pods),
            };
        }
    }
}
