//! The thin I/O around [`drift::compare`]: each agent Heartbeat that says
//! what the agent holds is compared with what the manager wants on its
//! cluster (one cached scan serves every session, [`super::wanted`]); when
//! the two stay apart, the session's DesiredSet is sent again through the
//! fleet — the agent's orphan sweep and its brake do the rest — every Job
//! placed there is reconciled, and the resync is logged and counted.

use std::time::{Duration, Instant};

use jobrelay_proto::v1::Holding;
use tracing::{debug, warn};

use super::drift::{self, Drift, DriftVerdict, Mismatch};
use super::{Sessions, desired};
use crate::outbox::Outbox;

/// Heartbeat intervals between two DesiredSets sent again to one session.
const RESYNC_SPACING_HEARTBEATS: u32 = 10;

/// What one session compares and remembers.
pub(super) struct AntiEntropy {
    /// The session's id in the fleet.
    pub session: u64,
    /// The session's outbox, which counts the set-changing messages queued.
    pub outbox: Outbox,
    pub drift: Drift,
    /// The figures of the agent's last DeletionsHeld (unknown, live): the
    /// same again is not news.
    pub deletions_held: Option<(u32, u32, u32)>,
}

impl Sessions {
    /// Compares what the agent of `cluster` says it holds with what the
    /// manager wants there, and sends the DesiredSet again when they stayed
    /// apart. A Heartbeat without a Holding (before the session's DesiredSet,
    /// or an agent that says nothing of it) is only liveness.
    pub(super) fn heartbeat(
        &self,
        cluster: &str,
        session: &mut AntiEntropy,
        holding: Option<Holding>,
    ) {
        let Some(holding) = holding else { return };
        let now = Instant::now();
        let wanted = self.wanted.get(now, || {
            desired::wanted_by_cluster(&self.stores, self.remote_retention)
        });
        let wanted = wanted.get(cluster).copied().unwrap_or_default();
        let sent = session.outbox.set_changes_sent();
        let (drift, verdict) = drift::compare(
            session.drift,
            sent,
            &holding,
            wanted,
            now,
            self.resync_spacing(),
        );
        session.drift = drift;
        match verdict {
            DriftVerdict::InFlight | DriftVerdict::InStep => {}
            DriftVerdict::Differs(Mismatch { held, wanted }) => {
                debug!(
                    held = held.mirrors,
                    wanted = wanted.mirrors,
                    "the agent holds another desired set; looking again at the next heartbeat"
                );
            }
            DriftVerdict::Spaced(Mismatch { held, wanted }) => {
                debug!(
                    held = held.mirrors,
                    wanted = wanted.mirrors,
                    "the agent still holds another desired set; the last resync was too recent to send another"
                );
            }
            DriftVerdict::OutOfStep(mismatch) => self.resync(cluster, session.session, mismatch),
        }
    }

    /// Sends the DesiredSet of `cluster` again on `session`.
    fn resync(&self, cluster: &str, session: u64, Mismatch { held, wanted }: Mismatch) {
        let (desired, known) =
            desired::resync_for_cluster(&self.stores, cluster, self.remote_retention);
        let wanted_now = desired.len();
        let Some(resent) = self.fleet.resync(cluster, session, desired, &known) else {
            debug!("the session ended before its DesiredSet could be sent again");
            return;
        };
        warn!(
            held = held.mirrors,
            wanted = wanted.mirrors,
            sent = wanted_now + resent.kept,
            kept_while_sent = resent.kept,
            "the agent's desired set differs from what the manager wants on two heartbeats in a row; sending the DesiredSet again"
        );
        self.metrics.desired_set_resent(cluster);
        self.fleet.trigger_all(resent.keys);
    }

    /// The least time between two DesiredSets sent again to one session.
    fn resync_spacing(&self) -> Duration {
        self.heartbeat_interval * RESYNC_SPACING_HEARTBEATS
    }
}
