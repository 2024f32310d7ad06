//! The orphan sweep: everything of this origin on the worker whose origin UID
//! the manager does not want is deleted, the same way as a requested delete.
//! This is what cleans up after restarts, Lost clusters and deletions that
//! happened while the agent was away. The brake on mass deletion
//! ([`super::brake`]) judges the orphans the manager did not say it knows.

use std::collections::HashSet;
use std::time::Instant;

use jobrelay_proto::holding::OriginUids;
use jobrelay_proto::v1::{DeletionsHeld, MirrorPhase, agent_message::Kind};
use kube::{Resource, ResourceExt};
use prometheus_client::metrics::gauge::Gauge;
use tracing::{debug, info, warn};

use super::brake::{Brake, BrakeVerdict};
use super::{Mirrors, agent_message, mirror, origin_uid};
use crate::kinds;

/// Orphans found in one sweep above which each is logged at debug only.
const LOG_EACH_UP_TO: usize = 20;

/// What the sweep knows beyond the desired set: what the manager's last
/// DesiredSet said it releases, and the brake.
#[derive(Default)]
pub(super) struct Sweep {
    released: HashSet<String>,
    after_lost: bool,
    /// The brake on orphans the manager does not know.
    brake: Brake,
    /// The brake on orphans the manager released: the same limits, its own
    /// time.
    released_brake: Brake,
    /// Set to the orphans the brakes hold after each sweep.
    pub(super) held_gauge: Gauge,
    /// For the manager, once the brake begins to hold.
    notice: Option<DeletionsHeld>,
}

impl Mirrors {
    /// The manager's complete list (`desired`: each origin UID with its
    /// namespace), the origin UIDs it knows it releases, and whether the
    /// cluster comes back from Lost: anything else of this origin goes, as
    /// far as the brake allows.
    pub fn set_desired(
        &mut self,
        desired: impl IntoIterator<Item = (String, String)>,
        released: impl IntoIterator<Item = String>,
        after_lost: bool,
    ) {
        self.desired.replace(desired);
        // Mid-session, an apply taken before may wait still: the manager no
        // longer wants it, so it is not sent (it would come back an orphan).
        if let Some(desired) = self.desired.uids() {
            let unwanted: Vec<String> = (self.records.uids())
                .filter(|uid| !desired.contains(uid))
                .cloned()
                .collect();
            for uid in unwanted {
                self.on(&uid, mirror::Event::Unwanted, &mut Vec::new());
            }
        }
        self.sweep.released = released.into_iter().collect();
        self.sweep.after_lost = after_lost;
        self.everything_due = true;
        self.sweep_orphans();
    }

    /// Starts deleting every mirror and Pod of this origin whose origin UID the
    /// manager does not want (nothing before the first DesiredSet of a
    /// session), holding back the unknown ones while the brake says so.
    pub fn sweep_orphans(&mut self) {
        let Some(desired) = self.desired.uids() else {
            return;
        };
        // A child (a JobSet's Job) names no mirror, as a Pod does not.
        let jobs = self.objects.state().into_iter().filter_map(|object| {
            let meta = object.object_meta();
            let top = kinds::parent(meta).is_none();
            Some(HeldMirror {
                origin_uid: origin_uid(meta)?,
                namespace: meta.namespace.clone().unwrap_or_default(),
                name: match top {
                    true => meta.name.clone().unwrap_or_default(),
                    false => String::new(),
                },
                stopped: top && stopped(object.mirror_phase()),
            })
        });
        let pods = self.pods.state().into_iter().filter_map(|pod| {
            Some(HeldMirror {
                origin_uid: origin_uid(pod.meta())?,
                namespace: pod.namespace().unwrap_or_default(),
                name: String::new(),
                stopped: false,
            })
        });
        let held: Vec<HeldMirror> = jobs.chain(pods).collect();
        let live = held
            .iter()
            .map(|m| m.origin_uid.as_str())
            .filter(|uid| !self.is_deleting(uid))
            .collect::<HashSet<_>>()
            .len();
        let orphans = orphans(held, desired, |uid| self.is_deleting(uid));
        let orphans = self.sweep.allowed(orphans, live, Instant::now());
        if orphans.len() > LOG_EACH_UP_TO {
            info!(
                orphans = orphans.len(),
                "orphan sweep: deleting what the manager does not want"
            );
        }
        // An orphan is never being deleted already: each one begun adds one.
        let deleting = self.deleting_count();
        for (
            begun,
            HeldMirror {
                origin_uid: uid,
                namespace,
                name,
                ..
            },
        ) in orphans.into_iter().enumerate()
        {
            if deleting + begun < LOG_EACH_UP_TO {
                info!(%uid, %namespace, %name, "not desired by the manager; deleting");
            } else {
                debug!(%uid, %namespace, %name, "not desired by the manager; deleting");
            }
            self.begin_delete(uid, namespace, name);
        }
    }
}

impl Sweep {
    pub(super) fn new(brake: Brake) -> Self {
        Sweep {
            released_brake: brake.clone(),
            brake,
            ..Sweep::default()
        }
    }

    /// Of `orphans` (among `live` mirrors), those to delete now, as two
    /// brakes judge them, each on its own time: the unknown ones wait while
    /// they alone are beyond the share; the ones the manager released (all,
    /// back from Lost) that can start no Pod (fenced, suspended, finished)
    /// while the orphans of both kinds are. So neither a manager that forgot
    /// its Jobs nor one that releases them all at once empties the worker in
    /// one message. A released mirror that may still run Pods goes at once:
    /// its Job runs elsewhere now, or is gone, and two copies never run.
    fn allowed(&mut self, orphans: Vec<HeldMirror>, live: usize, now: Instant) -> Vec<HeldMirror> {
        let (released, unknown): (Vec<_>, Vec<_>) = orphans
            .into_iter()
            .partition(|m| self.after_lost || self.released.contains(&m.origin_uid));
        let all = released.len() + unknown.len();
        let (stopped, may_run): (Vec<_>, Vec<_>) = released.into_iter().partition(|m| m.stopped);
        // Judged by all the orphans, while there is any to hold.
        let count = match stopped.is_empty() {
            true => 0,
            false => all,
        };
        let released = judged(&mut self.released_brake, stopped, count, live, now);
        let unknown_count = unknown.len();
        let unknown = judged(&mut self.brake, unknown, unknown_count, live, now);
        for (judged, whose) in [
            (&released, "the manager released"),
            (&unknown, "the manager does not know"),
        ] {
            match judged.verdict {
                BrakeVerdict::Confirmed {
                    orphans: count,
                    live,
                } => warn!(
                    count,
                    live, whose, "deletion brake: the manager still does not want them; deleting"
                ),
                BrakeVerdict::Hold {
                    orphans: count,
                    live,
                    left,
                    first: true,
                } => warn!(
                    count, live, whose, confirm_in = ?left,
                    "deletion brake: the DesiredSet would delete more of the live mirrors than the limits allow at once; holding them"
                ),
                _ => {}
            }
        }
        let began = [&released, &unknown]
            .iter()
            .any(|j| matches!(j.verdict, BrakeVerdict::Hold { first: true, .. }));
        if began {
            let left = [&released, &unknown]
                .iter()
                .filter_map(|j| match j.verdict {
                    BrakeVerdict::Hold { left, .. } => Some(left),
                    _ => None,
                })
                .min()
                .unwrap_or_default();
            let count = |held: usize| u32::try_from(held).unwrap_or(u32::MAX);
            self.notice = Some(DeletionsHeld {
                unknown: count(unknown.held),
                live: count(live),
                confirm_in: prost_types::Duration::try_from(left).ok(),
                released: count(released.held),
            });
        }
        self.held_gauge.set((released.held + unknown.held) as i64);
        (may_run.into_iter())
            .chain(released.delete)
            .chain(unknown.delete)
            .collect()
    }

    /// The notice the brake left for the manager, once.
    pub(super) fn take_notice(&mut self) -> Option<jobrelay_proto::v1::AgentMessage> {
        self.notice
            .take()
            .map(|held| agent_message(Kind::DeletionsHeld(held)))
    }
}

/// One kind of orphans as a brake judged them (by `count` orphans of
/// `live`): those to delete now, and how many it holds.
struct Judged {
    delete: Vec<HeldMirror>,
    held: usize,
    verdict: BrakeVerdict,
}

fn judged(
    brake: &mut Brake,
    orphans: Vec<HeldMirror>,
    count: usize,
    live: usize,
    now: Instant,
) -> Judged {
    let verdict = brake.judge(count, live, now);
    match verdict {
        BrakeVerdict::Hold { .. } => Judged {
            held: orphans.len(),
            delete: Vec::new(),
            verdict,
        },
        _ => Judged {
            delete: orphans,
            held: 0,
            verdict,
        },
    }
}

/// A Job or Pod of this origin found on the worker.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HeldMirror {
    pub origin_uid: String,
    pub namespace: String,
    /// The Job's name; empty for a Pod.
    pub name: String,
    /// The mirror can start no Pod: suspended (fenced) or finished. Never
    /// said of a Pod, nor of a JobSet's Job.
    pub stopped: bool,
}

/// Whether a mirror in `phase` can start no Pod.
fn stopped(phase: MirrorPhase) -> bool {
    matches!(
        phase,
        MirrorPhase::Suspended
            | MirrorPhase::Succeeded
            | MirrorPhase::Failed
            | MirrorPhase::Deleting
    )
}

/// The orphan decision: of what is `held`, the mirrors whose origin UID the
/// manager does not want and that are not `deleting` already, one per origin
/// UID, ordered by it. Of several entries of one UID the Job's is kept, so
/// the deletion is logged with its name.
pub fn orphans(
    held: impl IntoIterator<Item = HeldMirror>,
    desired: &OriginUids,
    deleting: impl Fn(&str) -> bool,
) -> Vec<HeldMirror> {
    let mut orphans: Vec<HeldMirror> = held
        .into_iter()
        .filter(|m| !desired.contains(&m.origin_uid) && !deleting(&m.origin_uid))
        .collect();
    orphans.sort_by(|a, b| {
        (&a.origin_uid, a.name.is_empty())
            .cmp(&(&b.origin_uid, b.name.is_empty()))
            .then_with(|| a.cmp(b))
    });
    orphans.dedup_by(|a, b| a.origin_uid == b.origin_uid);
    orphans
}

#[cfg(test)]
#[path = "orphans_tests.rs"]
mod tests;
