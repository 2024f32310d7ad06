//! A manager Job's life, as pure decisions over plain data: where the Job
//! stands ([`lifecycle`]: active, suspended, finished, being deleted), what
//! the fleet knows of its mirror, the configuration and the clock. The
//! controller in `reconcile.rs` asks [`next_step`] what to do, does the
//! fleet's part (place, apply, delete), hands the fleet's answer to
//! [`super::plan`], and carries out the plan it returns. Nothing here does
//! I/O.
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
use k8s_openapi::jiff::Timestamp;

use crate::config::Config;
use crate::job::lifecycle::{Lifecycle, has_finalizer, is_relayed, lifecycle};
use crate::job::placement::assigned_cluster;
use crate::job::retention::{deactivated_at, finished_at, remaining, remote_retention};
use crate::job::withdrawal::Withdrawal;
use crate::kinds::RelayedKind;
use crate::mirror::{LostMirror, Mirror};

/// Whether `object` holds its pod templates, as every object the API
/// server returns does; a cached copy does not.
pub fn is_whole<K: RelayedKind>(object: &K) -> bool {
    object.is_whole()
}

pub use crate::kinds::revision;

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
    /// Show a lost mirror on the Job (see [`super::plan::show_loss`]).
    ShowLoss { cluster: String, lost: LostMirror },
    /// Have the mirror deleted (see [`super::plan::after_cleanup`]).
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
    /// [`super::plan::after_withdrawal`]); `why`, when the step itself
    /// knows (else what asked for it says).
    Withdraw {
        cluster: String,
        why: Option<Withdrawal>,
    },
}

impl Step {
    /// Withdraw the mirror on `cluster`, for a reason the step knows.
    pub fn withdraw(cluster: String, withdrawal: Withdrawal) -> Step {
        let why = Some(withdrawal);
        Step::Withdraw { cluster, why }
    }
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
pub fn next_step<K: RelayedKind>(
    job: &K,
    mirror: Option<&Mirror>,
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
            Step::Withdraw { cluster, why: None }
        }
        (Lifecycle::Active | Lifecycle::Suspended, Some(cluster)) => {
            match mirror.and_then(|m| m.state.unshown_loss().cloned()) {
                Some(lost) => Step::ShowLoss { cluster, lost },
                None if !held => Step::Hold { cluster },
                None => Step::Apply { cluster },
            }
        }
        (Lifecycle::Finished | Lifecycle::Deleting, None) if held => Step::Release,
        (Lifecycle::Finished, Some(cluster)) if held => {
            let (keep, _) = remote_retention(job, config.retention.remote_after_finished);
            // A mirror lost or gone keeps nothing worth waiting for.
            let remains = mirror.is_none_or(|m| !m.state.lost_or_gone());
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
            keep: match (
                job.ttl_on_manager(),
                config.retention.manager_after_finished,
            ) {
                (Some(own), Some(configured)) => Some(own.min(configured)),
                (own, configured) => own.or(configured),
            },
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

/// A running Job whose cluster is Lost moves: its mirror there is withdrawn
/// (given up at once, the agent deletes it when it returns) and the Job
/// placed afresh. By then the cut-off agent has fenced the mirror — it
/// suspends its mirrors after the cluster's `fenceAfter`, shorter than
/// `lostAfter` — so the Job never runs beside its old copy. Only a Job
/// jobrelay places by itself (`movable`): one a manager-side Kueue admits
/// is sent back through the admission check, and Kueue places it again.
pub fn moved_when_lost(step: Step, movable: bool, lost: impl Fn(&str) -> bool) -> Step {
    match step {
        Step::Apply { cluster } | Step::Hold { cluster } if movable && lost(&cluster) => {
            Step::Withdraw { cluster, why: None }
        }
        other => other,
    }
}

/// Where a Job kept `keep` after `since` stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Kept for good (no retention configured, or no moment to count from).
    Never,
    /// Due after this long.
    In(Duration),
    /// Due now.
    Due,
}

pub fn expiry(since: Option<Timestamp>, keep: Option<Duration>, now: Timestamp) -> Expiry {
    let (Some(since), Some(keep)) = (since, keep) else {
        return Expiry::Never;
    };
    match remaining(now, since, keep) {
        Some(left) => Expiry::In(left),
        None => Expiry::Due,
    }
}

#[cfg(test)]
#[path = "life_tests.rs"]
pub(super) mod tests;
