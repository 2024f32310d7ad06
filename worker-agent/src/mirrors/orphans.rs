//! The orphan sweep: everything of this origin on the worker whose origin UID
//! the manager does not want is deleted, the same way as a requested delete.
//! This is what cleans up after restarts, Lost clusters and deletions that
//! happened while the agent was away. The brake on mass deletion
//! ([`super::brake`]) judges the orphans the manager did not say it knows.

use std::collections::HashSet;
use std::time::Instant;

use jobrelay_proto::holding::OriginUids;
use jobrelay_proto::v1::{DeletionsHeld, agent_message::Kind};
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
            Some(HeldMirror {
                origin_uid: origin_uid(meta)?,
                namespace: meta.namespace.clone().unwrap_or_default(),
                name: match kinds::parent(meta) {
                    None => meta.name.clone().unwrap_or_default(),
                    Some(_) => String::new(),
                },
            })
        });
        let pods = self.pods.state().into_iter().filter_map(|pod| {
            Some(HeldMirror {
                origin_uid: origin_uid(pod.meta())?,
                namespace: pod.namespace().unwrap_or_default(),
                name: String::new(),
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
    /// they alone are beyond the share, the ones the manager released (all,
    /// back from Lost) while the orphans of both kinds are. So neither a
    /// manager that forgot its Jobs nor one that releases them all at once
    /// empties the worker in one message.
    fn allowed(&mut self, orphans: Vec<HeldMirror>, live: usize, now: Instant) -> Vec<HeldMirror> {
        let (released, unknown): (Vec<_>, Vec<_>) = orphans
            .into_iter()
            .partition(|m| self.after_lost || self.released.contains(&m.origin_uid));
        let all = released.len() + unknown.len();
        let released = judged(&mut self.released_brake, released, all, live, now);
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
        released.delete.into_iter().chain(unknown.delete).collect()
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
mod tests {
    use super::*;

    fn held(uid: &str, namespace: &str, name: &str) -> HeldMirror {
        HeldMirror {
            origin_uid: uid.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn uids(orphans: &[HeldMirror]) -> Vec<&str> {
        orphans.iter().map(|m| m.origin_uid.as_str()).collect()
    }

    #[test]
    fn nothing_is_an_orphan_when_the_manager_wants_everything_held() {
        let desired: OriginUids = ["u1", "u2"].map(String::from).into_iter().collect();
        let found = orphans(
            [
                held("u1", "ml", "a"),
                held("u2", "ml", "b"),
                held("u2", "ml", ""),
            ],
            &desired,
            |_| false,
        );
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn what_is_not_desired_and_not_yet_deleting_is_an_orphan_once_in_uid_order() {
        let desired: OriginUids = ["u1"].map(String::from).into_iter().collect();
        let found = orphans(
            [
                held("u4", "ml", "d"),
                held("u1", "ml", "a"),
                held("u3", "ml", "c"),
                held("u3", "ml", "c"),
                held("u2", "ml", "b"),
                held("u5", "batch", ""),
            ],
            &desired,
            |uid| uid == "u2",
        );
        assert_eq!(uids(&found), ["u3", "u4", "u5"]);
        assert_eq!(found[0], held("u3", "ml", "c"));
        assert_eq!(
            found[2],
            held("u5", "batch", ""),
            "a Pod alone is an orphan"
        );
    }

    #[test]
    fn of_a_job_and_its_pods_one_entry_is_kept() {
        let found = orphans(
            [
                held("u1", "ml", ""),
                held("u1", "ml", "train"),
                held("u1", "ml", ""),
            ],
            &OriginUids::default(),
            |_| false,
        );
        assert_eq!(
            found,
            [held("u1", "ml", "train")],
            "the Job's entry names it"
        );
    }

    fn sweep(after_lost: bool, released: &[&str]) -> Sweep {
        let mut sweep = Sweep::new(Brake::new(super::super::BrakeSettings {
            share: 0.5,
            at_least: 2,
            confirm: std::time::Duration::from_secs(60),
        }));
        sweep.after_lost = after_lost;
        sweep.released = released.iter().map(|u| u.to_string()).collect();
        sweep
    }

    fn four_orphans() -> Vec<HeldMirror> {
        ["a", "b", "c", "d"]
            .iter()
            .map(|u| held(u, "ml", &format!("job-{u}")))
            .collect()
    }

    #[test]
    fn the_brake_holds_unknown_orphans_beyond_the_share() {
        let mut sweep = sweep(false, &[]);
        let now = Instant::now();
        let allowed = sweep.allowed(four_orphans()[1..].to_vec(), 5, now);
        assert!(allowed.is_empty(), "three unknown of five live are held");
        assert_eq!(sweep.held_gauge.get(), 3);
        let notice = sweep.take_notice().expect("the manager hears of it");
        assert!(
            matches!(
                notice.kind,
                Some(Kind::DeletionsHeld(DeletionsHeld {
                    unknown: 3,
                    released: 0,
                    live: 5,
                    ..
                }))
            ),
            "{notice:?}"
        );
        assert!(sweep.take_notice().is_none(), "once");
        let later = sweep.allowed(
            four_orphans()[1..].to_vec(),
            4,
            now + std::time::Duration::from_secs(60),
        );
        assert_eq!(uids(&later), ["b", "c", "d"], "confirmed after the wait");
        assert_eq!(sweep.held_gauge.get(), 0);
    }

    #[test]
    fn a_small_share_is_never_held_released_or_not() {
        let mut back = sweep(true, &[]);
        assert_eq!(back.allowed(four_orphans(), 10, Instant::now()).len(), 4);
        assert!(back.take_notice().is_none());
        let mut churn = sweep(false, &[]);
        assert_eq!(
            churn.allowed(four_orphans(), 10, Instant::now()).len(),
            4,
            "four of ten is not more than half"
        );
    }

    #[test]
    fn released_beyond_the_share_wait_for_the_confirmation_on_their_own_time() {
        for mut sweep in [sweep(true, &[]), sweep(false, &["a", "b", "c", "d"])] {
            let now = Instant::now();
            assert!(
                sweep.allowed(four_orphans(), 5, now).is_empty(),
                "four of five held"
            );
            assert_eq!(sweep.held_gauge.get(), 4);
            let notice = sweep.take_notice().expect("the manager hears of it");
            assert!(
                matches!(
                    notice.kind,
                    Some(Kind::DeletionsHeld(DeletionsHeld {
                        unknown: 0,
                        released: 4,
                        live: 5,
                        ..
                    }))
                ),
                "{notice:?}"
            );
            let later = sweep.allowed(four_orphans(), 5, now + std::time::Duration::from_secs(60));
            assert_eq!(
                uids(&later),
                ["a", "b", "c", "d"],
                "confirmed after the wait"
            );
        }
    }

    #[test]
    fn released_wait_while_both_kinds_together_are_beyond_the_share() {
        // Two released and two unknown of five: the unknown alone are not
        // more than half and go; all four are, so the released wait.
        let mut sweep = sweep(false, &["a", "b"]);
        let allowed = sweep.allowed(four_orphans(), 5, Instant::now());
        assert_eq!(uids(&allowed), ["c", "d"]);
        assert_eq!(sweep.held_gauge.get(), 2);
    }
}
