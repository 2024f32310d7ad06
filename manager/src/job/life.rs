//! A manager Job's life, as pure decisions over plain data: the Job, what
//! the fleet knows of its mirror, the configuration and the clock. The
//! controller in `reconcile.rs` asks [`next_step`] what to do, does the
//! fleet's part (place, apply, delete), hands the fleet's answer to
//! [`after_apply`], [`after_cleanup`] or [`show_loss`], and carries out the
//! [`Plan`] they return. Nothing here does I/O.
//!
//! - Active: hold the finalizer and the chosen cluster (recorded before
//!   anything is sent), have the mirror applied; a mirror lost behind
//!   jobrelay's back is counted and run again, or the Job fails.
//! - Suspended: a placed Job keeps its mirror, applied suspended (its Pods
//!   go, the Job object and its counts stay); resuming applies it unsuspended.
//!   An unplaced suspended Job waits — unless Kueue reserved quota for it
//!   (`admitted`), which places it so the mirror is ready before Kueue admits.
//!   When Kueue evicts the Job (or its worker's own Kueue, which owns the
//!   mirror's `suspend`, must let go of it), the mirror is withdrawn —
//!   deleted, Pods first — and the Job unplaced, to be placed afresh on
//!   readmission.
//! - Finished: keep the mirror for `retention.remoteAfterFinished`, then have
//!   it deleted and release the finalizer; delete the manager Job itself
//!   after `retention.managerAfterFinished`.
//! - Being deleted: have the mirror deleted and, once the agent confirmed
//!   every Pod gone (or the cluster is Lost), release the finalizer.
//! - Deactivated (its pinned cluster is Lost): deleted after
//!   `retention.afterDeactivated`.

use std::time::Duration;

use jobrelay_proto::v1::DeleteReason;
use jobrelay_proto::wire::{DISPATCH_WAITING_ANNOTATION, REMOTE_JOB_LOST, REMOTE_REJECTED};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::config::Config;
use crate::fleet::views::{Apply, Cleanup, LostMirror, MirrorView, Rejection};
use crate::job::loss::{LostStep, lost_so_far, on_lost};
use crate::job::mirror::{Lifecycle, has_finalizer, is_relayed, lifecycle};
use crate::job::placement::assigned_cluster;
use crate::job::retention::{deactivated_at, finished_at, remaining, remote_retention};
use crate::job::status;
use crate::kueue::Withdrawal;
use crate::telemetry::events::Reason;

/// How long to wait before looking again when an agent must act first.
pub const AWAIT_AGENT: Duration = Duration::from_secs(30);
/// How long to wait when the Job's cluster is not connected.
pub const AWAIT_CLUSTER: Duration = Duration::from_secs(10);
/// A periodic look at every active Job, in case a trigger was missed.
pub const RESYNC: Duration = Duration::from_secs(300);

/// The first thing to do for a manager Job.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Not jobrelay's, or nothing to do until it changes.
    AwaitChange,
    /// Look again after this long.
    Requeue(Duration),
    /// Choose a cluster, hold the Job there, apply its mirror.
    Place,
    /// The cluster is recorded but not the finalizer: hold, then apply.
    Hold { cluster: String },
    /// Have the mirror applied on its cluster.
    Apply { cluster: String },
    /// Show a lost mirror on the Job (see [`show_loss`]).
    ShowLoss { cluster: String, lost: LostMirror },
    /// Have the mirror deleted (see [`after_cleanup`]).
    Cleanup {
        cluster: String,
        reason: DeleteReason,
    },
    /// Held but never sent anywhere: release the finalizer.
    Release,
    /// Forget the mirror (if any) and delete the manager Job once `keep`
    /// has passed since `since` (see [`expiry`]).
    Expire {
        since: Option<Timestamp>,
        keep: Option<Duration>,
        what: &'static str,
        forget: Option<String>,
    },
    /// The Job is going and holds nothing: forget its mirror.
    Forget { cluster: String },
    /// Have the mirror withdrawn, then unplace the Job (see
    /// [`after_withdrawal`]).
    Withdraw { cluster: String },
}

/// What Kueue asks of a suspended Job, through jobrelay's admission check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum KueueAsks {
    #[default]
    Nothing,
    /// Kueue reserved quota for the Job and waits on jobrelay's check:
    /// place it now, so its mirror is ready before Kueue admits it.
    Place,
    /// Kueue evicted the Job (or its mirror is queued in its worker's own
    /// Kueue, which owns the mirror's `suspend`): the mirror is withdrawn —
    /// deleted, Pods first — and the Job unplaced.
    Withdraw,
}

/// Decides the first thing to do for `job`, whose mirror the fleet knows as
/// `mirror` (on the Job's recorded cluster).
pub fn next_step(
    job: &Job,
    mirror: Option<&MirrorView>,
    kueue: KueueAsks,
    config: &Config,
    now: Timestamp,
) -> Step {
    if !is_relayed(job) {
        return Step::AwaitChange;
    }
    let assigned = assigned_cluster(job).map(str::to_string);
    let held = has_finalizer(job);
    match (lifecycle(job), assigned) {
        (Lifecycle::Active, _) if deactivated_at(job).is_some() => Step::Expire {
            since: deactivated_at(job),
            keep: config.retention.after_deactivated,
            what: "deactivated",
            forget: None,
        },
        (Lifecycle::Active, None) => Step::Place,
        (Lifecycle::Suspended, None) if kueue == KueueAsks::Place => Step::Place,
        (Lifecycle::Suspended, None) => Step::AwaitChange,
        (Lifecycle::Suspended, Some(cluster)) if kueue == KueueAsks::Withdraw => {
            Step::Withdraw { cluster }
        }
        (Lifecycle::Active | Lifecycle::Suspended, Some(cluster)) => {
            match mirror.and_then(|m| m.lost.clone()).filter(|l| !l.accounted) {
                Some(lost) => Step::ShowLoss { cluster, lost },
                None if !held => Step::Hold { cluster },
                None => Step::Apply { cluster },
            }
        }
        (Lifecycle::Finished | Lifecycle::Deleting, None) if held => Step::Release,
        (Lifecycle::Finished, Some(cluster)) if held => {
            let (keep, _) = remote_retention(job, config.retention.remote_after_finished);
            // A mirror lost or gone keeps nothing worth waiting for.
            let remains = mirror.is_none_or(|m| m.lost.is_none() && m.gone.is_none());
            match finished_at(job).and_then(|at| remaining(now, at, keep)) {
                Some(left) if remains => Step::Requeue(left),
                _ => Step::Cleanup {
                    cluster,
                    reason: DeleteReason::RetentionExpired,
                },
            }
        }
        (Lifecycle::Finished, forget) => Step::Expire {
            since: finished_at(job),
            keep: config.retention.manager_after_finished,
            what: "finished",
            forget,
        },
        (Lifecycle::Deleting, Some(cluster)) if held => Step::Cleanup {
            cluster,
            reason: DeleteReason::ManagerJobDeleted,
        },
        (Lifecycle::Deleting, Some(cluster)) => Step::Forget { cluster },
        (Lifecycle::Deleting, None) => Step::AwaitChange,
    }
}

/// One write or record the controller carries out, in order; a failed one
/// ends the plan (the reconcile is retried).
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Record an Event on the Job.
    Event(Reason, String),
    /// Write these copied status fields (a merge patch).
    WriteStatus(Value),
    /// Set (or remove, with `None`) an annotation of the Job.
    Annotate(&'static str, Option<String>),
    /// Count a lost mirror in the Job's annotations, conditional on the Job
    /// being the one the decision read.
    CountLoss { lost: u32, mirror_uid: String },
    /// The fleet may take the loss as shown.
    LossShown,
    /// Remove the remote-cleanup finalizer.
    RemoveFinalizer,
    /// Drop what the fleet knows of the mirror.
    Forget,
    /// Drop the Job's cluster and finalizer (nothing of it is left on any
    /// worker, or the cluster is Lost), recording the cluster it leaves —
    /// tried last next time, avoided until `avoid_until` if set — and adding
    /// it to `jobrelay.dev/not-admitted-by` when its Kueue did not admit the
    /// mirror in time; the withdrawal is done.
    Unplace {
        from: String,
        not_admitted: bool,
        avoid_until: Option<Timestamp>,
    },
}

/// What to do, then when to look again (`None`: when the Job changes).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub effects: Vec<Effect>,
    pub then: Option<Duration>,
}

impl Plan {
    fn then(then: Option<Duration>) -> Plan {
        Plan {
            effects: Vec::new(),
            then,
        }
    }

    fn with(mut self, effect: Effect) -> Plan {
        self.effects.push(effect);
        self
    }
}

/// What follows the fleet's answer to an apply of `job`'s mirror on
/// `cluster`; `held` says whether the worker reported holding it.
pub fn after_apply(
    job: &Job,
    cluster: &str,
    revision: u64,
    outcome: Apply,
    held: bool,
    now: Timestamp,
) -> Plan {
    let waiting = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DISPATCH_WAITING_ANNOTATION));
    match outcome {
        Apply::Sent => {
            let attempt = lost_so_far(job).count + 1;
            let mut note = format!("sent to cluster {cluster} (revision {revision})");
            if attempt > 1 {
                note.push_str(&format!(", attempt {attempt}"));
            }
            Plan::then(Some(RESYNC)).with(Effect::Event(Reason::Dispatched, note))
        }
        Apply::Rejected(rejection) => {
            let message = refusal_text(cluster, &rejection);
            let shown = status::shown(job.status.as_ref());
            let failed = status::failed(&shown, REMOTE_REJECTED, &message, &now.to_string());
            Plan::then(None).with(Effect::WriteStatus(failed))
        }
        Apply::Waiting(rejection) => {
            let text = refusal_text(cluster, &rejection);
            let plan = Plan::then(Some(AWAIT_AGENT));
            if waiting == Some(&text) {
                plan
            } else {
                plan.with(Effect::Annotate(DISPATCH_WAITING_ANNOTATION, Some(text)))
            }
        }
        Apply::InPlace if held && waiting.is_some() => {
            Plan::then(Some(RESYNC)).with(Effect::Annotate(DISPATCH_WAITING_ANNOTATION, None))
        }
        Apply::InPlace => Plan::then(Some(RESYNC)),
        Apply::AwaitingGone => Plan::then(Some(AWAIT_AGENT)),
        Apply::Disconnected => Plan::then(Some(AWAIT_CLUSTER)),
    }
}

/// A refusal in words a user can act on.
pub fn refusal_text(cluster: &str, rejection: &Rejection) -> String {
    format!(
        "cluster {cluster} refused the Job ({}): {}",
        rejection.reason.as_str_name(),
        rejection.message
    )
}

/// What follows the fleet's answer to a deletion of the mirror on `cluster`.
/// `cluster_lost`: the cluster is Lost.
pub fn after_cleanup(cluster: &str, outcome: Cleanup, cluster_lost: bool) -> Plan {
    match outcome {
        Cleanup::Gone { pods_deleted } => Plan::then(None)
            .with(Effect::RemoveFinalizer)
            .with(Effect::Forget)
            .with(Effect::Event(
                Reason::RemotePodsGone,
                format!(
                    "mirror Job and every Pod gone from cluster {cluster} ({pods_deleted} Pods deleted by the agent)"
                ),
            )),
        Cleanup::Disconnected if cluster_lost => Plan::then(None)
            .with(Effect::RemoveFinalizer)
            .with(Effect::Forget)
            .with(Effect::Event(
                Reason::ClusterLost,
                format!(
                    "cluster {cluster} is Lost: the finalizer is released without its confirmation; its agent deletes the mirror and its Pods when it returns"
                ),
            )),
        Cleanup::Started { first: true } => Plan::then(Some(AWAIT_AGENT)).with(Effect::Event(
            Reason::RemoteCleanupStarted,
            format!("deleting the mirror on cluster {cluster} (Background propagation)"),
        )),
        Cleanup::Disconnected => Plan::then(Some(AWAIT_CLUSTER)),
        Cleanup::Started { first: false } | Cleanup::Waiting => Plan::then(Some(AWAIT_AGENT)),
    }
}

/// What follows the fleet's answer to a withdrawal of the mirror on
/// `cluster`: once it and its Pods are gone (or the cluster is Lost), the
/// Job shows nothing running and is unplaced, so Kueue releases its quota
/// and a later admission places it afresh.
pub fn after_withdrawal(
    job: &Job,
    cluster: &str,
    outcome: Cleanup,
    cluster_lost: bool,
    withdrawal: &Withdrawal,
    now: Timestamp,
) -> Plan {
    let gone = match outcome {
        Cleanup::Gone { .. } => true,
        Cleanup::Disconnected => cluster_lost,
        Cleanup::Started { first: true } => {
            return Plan::then(Some(AWAIT_AGENT)).with(Effect::Event(
                Reason::MirrorWithdrawalStarted,
                format!(
                    "withdrawing the mirror on cluster {cluster} (Background propagation): {}",
                    withdrawal.why
                ),
            ));
        }
        Cleanup::Started { first: false } | Cleanup::Waiting => false,
    };
    if !gone {
        let wait = if outcome == Cleanup::Disconnected {
            AWAIT_CLUSTER
        } else {
            AWAIT_AGENT
        };
        return Plan::then(Some(wait));
    }
    let avoid_until = withdrawal
        .avoid_for
        .filter(|d| !d.is_zero())
        .and_then(|d| now.checked_add(d).ok());
    let what = if cluster_lost && outcome == Cleanup::Disconnected {
        format!(
            "cluster {cluster} is Lost: the Job no longer counts its mirror there, which its agent deletes with its Pods when it returns ({})",
            withdrawal.why
        )
    } else {
        format!("the mirror and every Pod are gone from cluster {cluster}")
    };
    let next = match &avoid_until {
        Some(until) => format!(
            "; the Job is placed again when Kueue admits it, avoiding cluster {cluster} until {until}"
        ),
        None => "; the Job is placed again when Kueue admits it".to_string(),
    };
    let shown = status::shown(job.status.as_ref());
    Plan::then(None)
        .with(Effect::WriteStatus(status::after_suspension(&shown)))
        .with(Effect::Unplace {
            from: cluster.to_string(),
            not_admitted: withdrawal.not_admitted,
            avoid_until,
        })
        .with(Effect::Forget)
        .with(Effect::Event(Reason::MirrorWithdrawn, what + &next))
}

/// How a lost mirror is shown on its Job: the loss counted in its
/// annotations (once per lost mirror, whatever the reports), a status with
/// no Pods running — or, at `limit`, `Failed` — and a warning Event.
pub fn show_loss(job: &Job, cluster: &str, lost: &LostMirror, limit: u32, now: Timestamp) -> Plan {
    let step = on_lost(lifecycle(job), &lost_so_far(job), &lost.mirror_uid, limit);
    let count = match step {
        LostStep::AlreadyShown | LostStep::CleanUpOnly => {
            return Plan::then(Some(Duration::ZERO)).with(Effect::LossShown);
        }
        LostStep::RunAgain { lost } | LostStep::Fail { lost } => lost,
    };
    let shown = status::shown(job.status.as_ref());
    let what = format!(
        "the mirror on cluster {cluster} was lost: {}",
        lost.observed
    );
    let (status, note) = if let LostStep::Fail { .. } = step {
        let message = format!(
            "{what}; that is {count} lost of {limit} allowed (mirrorLostLimit), so the Job is not run again"
        );
        let failed = status::failed(&shown, REMOTE_JOB_LOST, &message, &now.to_string());
        (failed, message)
    } else {
        let note = format!(
            "{what}; it runs again as attempt {} of {limit} once the worker shows none of its Pods",
            count + 1
        );
        (status::after_suspension(&shown), note)
    };
    Plan::then(Some(AWAIT_AGENT))
        .with(Effect::CountLoss {
            lost: count,
            mirror_uid: lost.mirror_uid.clone(),
        })
        .with(Effect::WriteStatus(status))
        .with(Effect::Event(Reason::RemoteJobLost, note))
        .with(Effect::LossShown)
}

/// Where a Job kept `keep` after `since` stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Kept for good (no retention configured, or no moment to count from).
    Kept,
    /// Due after this long.
    In(Duration),
    /// Due now.
    Due,
}

pub fn expiry(since: Option<Timestamp>, keep: Option<Duration>, now: Timestamp) -> Expiry {
    let (Some(since), Some(keep)) = (since, keep) else {
        return Expiry::Kept;
    };
    match remaining(now, since, keep) {
        Some(left) => Expiry::In(left),
        None => Expiry::Due,
    }
}

#[cfg(test)]
#[path = "life_plan_tests.rs"]
mod plan_tests;
#[cfg(test)]
#[path = "life_tests.rs"]
mod tests;
