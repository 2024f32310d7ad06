//! What an agent reports, fed into the [`Fleet`](crate::fleet::Fleet): each
//! report is about one mirror and counts only if that mirror is placed on
//! the reporting cluster — checked before anything in the report is parsed.

use jobrelay_kinds::room::Room;
use std::time::{Duration, Instant};

use jobrelay_proto::kinds::{JOBSET, KindName};
use jobrelay_proto::v1::{
    ApplyRejected, DeletionsHeld, MirrorGone, MirrorLost, MirrorPhase, MirrorStatus, PodsHeld,
    WorkerEvents, agent_message,
};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use tracing::{debug, warn};

use super::anti_entropy::AntiEntropy;
use super::{Ended, Sessions};
use crate::job::held_pods::{self, HeldPod};
use crate::job::pods_why;
use crate::kinds::RelayedKind;
use crate::mirror::{Held, PodsSeen, Rejection, StatusText, Unschedulable};
use crate::telemetry::events::{Reason, object_reference};

impl Sessions {
    pub(super) async fn receive(
        &self,
        cluster: &str,
        kind: agent_message::Kind,
        anti_entropy: &mut AntiEntropy,
    ) -> Result<(), Ended> {
        use agent_message::Kind as K;
        match kind {
            K::Hello(_) => return Err(Ended::SecondHello),
            K::Heartbeat(beat) => self.heartbeat(cluster, anti_entropy, beat.holding),
            K::DeletionsHeld(held) => {
                if news(&mut anti_entropy.deletions_held, &held) {
                    self.deletions_held(cluster, &held);
                }
            }
            K::MirrorStatus(report) => self.mirror_status(cluster, report),
            K::MirrorGone(gone) => self.mirror_gone(cluster, gone),
            K::MirrorLost(lost) => self.mirror_lost(cluster, lost),
            K::ApplyRejected(rejected) => self.apply_rejected(cluster, rejected),
            K::Room(mut room) => {
                let counted = std::mem::take(&mut room.counted);
                self.fleet.set_room(cluster, Room::from(room), &counted)
            }
            K::PodsHeld(held) => self.pods_held(cluster, held),
            K::WorkerEvents(told) => self.worker_events(cluster, told),
            K::LogData(data) => self.logs.deliver(cluster, data),
        }
        Ok(())
    }

    /// A mirror's status: recorded if the mirror is placed on `cluster`
    /// (checked before the status is parsed), with an Event when it finished.
    fn mirror_status(&self, cluster: &str, report: MirrorStatus) {
        // Ownership first: the status of a mirror not placed on this
        // cluster is dropped unread.
        let Some(kind) = self.fleet.kind_of(cluster, &report.origin_uid) else {
            debug!(uid = %report.origin_uid, "status of a mirror not placed here; dropped");
            self.metrics.report_dropped(cluster);
            return;
        };
        let (copied, finished_at, pods_started) = match copied_status(kind, &report.status) {
            Ok(copied) => (Some(copied.text), copied.finished_at, copied.pods_started),
            Err(error) => {
                warn!(uid = %report.origin_uid, %kind, %error, "unreadable status from agent");
                (None, None, false)
            }
        };
        let phase = report.phase();
        let unschedulable = report.unschedulable.map(|waiting| Unschedulable {
            pods: waiting.pods,
            since: waiting
                .waited
                .and_then(|d| Duration::try_from(d).ok())
                .and_then(|waited| Instant::now().checked_sub(waited))
                .unwrap_or_else(Instant::now),
            message: waiting.message,
        });
        let held = Held {
            revision: report.revision,
            phase,
            status: copied,
            unschedulable,
            pods: report.pods.map(PodsSeen::from),
        };
        // Why its Pods failed, for the warning of a Job that failed.
        let failed_why = (phase == MirrorPhase::Failed)
            .then(|| held.pods.as_ref().and_then(pods_why::reasons))
            .flatten();
        let Some((changed_from, held_after)) =
            self.fleet.record_status(cluster, &report.origin_uid, held)
        else {
            debug!(uid = %report.origin_uid, "status of a mirror not placed here; dropped");
            self.metrics.report_dropped(cluster);
            return;
        };
        if let Some(took) = held_after {
            self.metrics.dispatched(cluster, took);
        }
        if finished_at.is_some() {
            self.fleet.release_room(cluster, &report.origin_uid);
        } else if pods_started {
            self.fleet.pods_started(cluster, &report.origin_uid);
        }
        if changed_from.is_some()
            && let Some(at) = finished_at
        {
            let took = Timestamp::now().duration_since(at);
            self.metrics
                .status_heard(cluster, Duration::try_from(took).unwrap_or_default());
        }
        if changed_from.is_some() {
            let reason = match phase {
                MirrorPhase::Succeeded => Some((
                    Reason::RemoteFinished,
                    format!("Job complete on cluster {cluster}"),
                )),
                MirrorPhase::Failed => Some((
                    Reason::RemoteFailed,
                    match failed_why {
                        Some(why) => format!("Job failed on cluster {cluster}: {why}"),
                        None => format!("Job failed on cluster {cluster}"),
                    },
                )),
                _ => None,
            };
            if let Some((reason, note)) = reason {
                self.publish(cluster, &report.origin_uid, reason, note);
            }
        }
    }

    /// A mirror and every Pod of it are gone from `cluster`.
    fn mirror_gone(&self, cluster: &str, gone: MirrorGone) {
        match self
            .fleet
            .record_gone(cluster, &gone.origin_uid, gone.pods_deleted)
        {
            Some(Some(took)) => self.metrics.cleaned_up(cluster, took),
            Some(None) => {}
            None => debug!(uid = %gone.origin_uid, "swept orphan confirmed gone"),
        }
    }

    /// A mirror vanished from `cluster` while it was wanted.
    fn mirror_lost(&self, cluster: &str, lost: MirrorLost) {
        if !self.placed_here(cluster, &lost.origin_uid) {
            return;
        }
        warn!(uid = %lost.origin_uid, mirror_uid = %lost.mirror_uid, observed = %lost.observed, "mirror lost on the worker");
        self.metrics.mirror_lost(cluster);
        if self
            .fleet
            .record_lost(cluster, &lost.origin_uid, &lost.mirror_uid, &lost.observed)
            .is_none()
        {
            self.metrics.report_dropped(cluster);
        }
    }

    /// `cluster` refused a mirror: recorded with an Event saying what follows.
    fn apply_rejected(&self, cluster: &str, rejected: ApplyRejected) {
        if !self.placed_here(cluster, &rejected.origin_uid) {
            return;
        }
        let reason = rejected.reason();
        let retry_in = rejected
            .retry_in
            .and_then(|d| std::time::Duration::try_from(d).ok());
        let permanent = reason.is_permanent();
        self.metrics
            .apply_refused(cluster, reason.as_str_name(), permanent);
        let (event, then) = if permanent {
            (Reason::RemoteRejected, "the Job fails".to_string())
        } else {
            let next =
                retry_in.map_or_else(String::new, |d| format!(" in {}s", d.as_secs_f64().ceil()));
            (
                Reason::DispatchWaiting,
                format!("its agent tries again{next}"),
            )
        };
        let note = format!(
            "cluster {cluster} refused the Job ({}): {}; {then}",
            reason.as_str_name(),
            rejected.message
        );
        warn!(uid = %rejected.origin_uid, %note, "apply rejected");
        let rejection = Rejection {
            revision: rejected.revision,
            reason,
            message: rejected.message,
            retry_in,
            since: std::time::Instant::now(),
        };
        if self
            .fleet
            .record_rejected(cluster, &rejected.origin_uid, rejection)
            .is_some()
        {
            self.publish(cluster, &rejected.origin_uid, event, note);
        } else {
            self.metrics.report_dropped(cluster);
        }
    }

    /// Pods of a mirror held Terminating on a node not Ready: a warning on
    /// its manager Job naming them (none once they are gone).
    fn pods_held(&self, cluster: &str, held: PodsHeld) {
        if !self.placed_here(cluster, &held.origin_uid) {
            return;
        }
        let pods: Vec<HeldPod> = held
            .pods
            .into_iter()
            .map(|p| HeldPod {
                node_down_for: p
                    .node_down_for
                    .and_then(|d| Duration::try_from(d).ok())
                    .unwrap_or_default(),
                pod: p.pod,
                node: p.node,
            })
            .collect();
        let timeout = self
            .registry
            .get(cluster)
            .and_then(|wc| wc.terminating_pod_timeout().ok().flatten());
        let note = held_pods::note(cluster, &pods, timeout);
        if self
            .fleet
            .record_pods_held(cluster, &held.origin_uid, pods)
            .is_none()
        {
            self.metrics.report_dropped(cluster);
            return;
        }
        let Some(note) = note else {
            debug!(uid = %held.origin_uid, "no Pod of the mirror held Terminating any more");
            return;
        };
        warn!(uid = %held.origin_uid, %note, "Pods held Terminating on a node not Ready");
        self.publish(
            cluster,
            &held.origin_uid,
            Reason::PodsStuckTerminating,
            note,
        );
    }

    /// Whether the mirror of `uid` is placed on `cluster`; a report of one
    /// that is not is dropped before it costs a log line, a note or a
    /// parse, and counted.
    fn placed_here(&self, cluster: &str, uid: &str) -> bool {
        let placed = self.fleet.key_of(cluster, uid).is_some();
        if !placed {
            self.metrics.report_dropped(cluster);
        }
        placed
    }

    /// Records an Event on the mirror's manager Job; the Event waits for its
    /// write in the Events queue, so the session keeps reading meanwhile.
    fn publish(&self, cluster: &str, uid: &str, reason: Reason, note: String) {
        if let Some(key) = self.fleet.key_of(cluster, uid) {
            let object = object_reference(&key, uid);
            self.events.publish(&object, reason, note);
        }
    }

    /// Warning Events on the worker about a mirror placed there, shown on
    /// its manager Job.
    fn worker_events(&self, cluster: &str, told: WorkerEvents) {
        let Some(key) = self.fleet.key_of(cluster, &told.origin_uid) else {
            self.metrics.report_dropped(cluster);
            return;
        };
        let object = object_reference(&key, &told.origin_uid);
        for event in told.events {
            let warning = pods_why::worker_warning(cluster, &event);
            let topic = &warning.topic;
            self.events
                .publish_on(&object, warning.reason, topic, warning.note);
        }
    }

    /// Shows on the WorkerCluster that the agent's brake holds deletions
    /// this manager's DesiredSet asked for.
    fn deletions_held(&self, cluster: &str, held: &DeletionsHeld) {
        let confirm_in = held
            .confirm_in
            .and_then(|d| Duration::try_from(d).ok())
            .unwrap_or_default();
        let note = held_note(held, confirm_in);
        warn!(
            unknown = held.unknown,
            released = held.released,
            live = held.live,
            ?confirm_in,
            "the agent's deletion brake holds"
        );
        if let Some(worker) = self.registry.get(cluster) {
            let regarding = worker.object_ref(&());
            self.events.publish(&regarding, Reason::DeletionsHeld, note);
        }
    }
}

/// What the WorkerCluster's Event says of a DeletionsHeld.
fn held_note(held: &DeletionsHeld, confirm_in: Duration) -> String {
    let what = match (held.unknown, held.released) {
        (unknown, 0) => format!(
            "{unknown} of {} live mirrors this manager does not know",
            held.live
        ),
        (0, released) => format!(
            "{released} of {} live mirrors this manager released",
            held.live
        ),
        (unknown, released) => format!(
            "{unknown} of {} live mirrors this manager does not know and {released} it released",
            held.live
        ),
    };
    format!(
        "the agent holds {what}: the DesiredSet would delete more at once than the agent's brake allows. \
         They are deleted in {confirm_in:?} if this manager still does not want them; if that is wrong, check this manager's Jobs and origin now"
    )
}

/// Whether a DeletionsHeld says what the session's `last` did not (which
/// it then remembers): the same figures again are neither logged nor
/// recorded again, however often an agent sends them.
fn news(last: &mut Option<(u32, u32, u32)>, held: &DeletionsHeld) -> bool {
    let figures = Some((held.unknown, held.released, held.live));
    let new = *last != figures;
    *last = figures;
    new
}

/// What [`RelayedKind::copied`] and [`RelayedKind::finish_time`] say for a
/// status report of a mirror of `kind`: the copied status as the manager
/// keeps it, and when the mirror finished.
/// What the manager takes of a worker's status: the copied part, when it
/// finished, and whether any of its Pods started.
struct Copied {
    text: StatusText,
    finished_at: Option<Timestamp>,
    pods_started: bool,
}

fn copied_status(kind: KindName, worker_status: &[u8]) -> serde_json::Result<Copied> {
    fn of<K: RelayedKind>(status: &[u8]) -> serde_json::Result<Copied> {
        let copied = K::copied(status)?;
        Ok(Copied {
            finished_at: K::finish_time(&copied),
            pods_started: K::pods_started(&copied),
            text: StatusText::new(&copied),
        })
    }
    if kind == JOBSET {
        of::<jobrelay_kinds::jobset::JobSet>(worker_status)
    } else {
        of::<k8s_openapi::api::batch::v1::Job>(worker_status)
    }
}

#[cfg(test)]
#[path = "reports_tests.rs"]
mod tests;
