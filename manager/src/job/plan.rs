//! What follows the fleet's answer for a manager Job — to an apply, a
//! deletion, a withdrawal, a lost mirror — as a [`Plan`] of effects the
//! controller carries out in order. Pure, like [`super::life`].

use std::time::Duration;

use jobrelay_proto::wire::{DISPATCH_WAITING_ANNOTATION, REMOTE_JOB_LOST, REMOTE_REJECTED};
use k8s_openapi::jiff::Timestamp;

use super::life::{AWAIT_AGENT, AWAIT_CLUSTER, RESYNC};
use crate::job::lifecycle::{Lifecycle, lifecycle};
use crate::job::loss::{LostStep, lost_so_far, on_lost};
use crate::job::withdrawal::Withdrawal;
use crate::kinds::RelayedKind;
use crate::mirror::{Apply, Cleanup, LostMirror, Rejection};
use crate::reason::Reason;

/// One write or record the controller carries out, in order; a failed one
/// ends the plan (the reconcile is retried).
#[derive(Debug, Clone, PartialEq)]
pub enum Effect<S> {
    /// Record an Event on the Job.
    Event(Reason, String),
    /// Write these copied status fields (a merge patch).
    WriteStatus(S),
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
pub struct Plan<S> {
    pub effects: Vec<Effect<S>>,
    pub then: Option<Duration>,
}

impl<S> Plan<S> {
    fn then(then: Option<Duration>) -> Plan<S> {
        Plan {
            effects: Vec::new(),
            then,
        }
    }

    fn with(mut self, effect: Effect<S>) -> Plan<S> {
        self.effects.push(effect);
        self
    }
}

/// What follows the fleet's answer to an apply of `job`'s mirror on
/// `cluster`; `held` says whether the worker reported holding it.
pub fn after_apply<K: RelayedKind>(
    job: &K,
    cluster: &str,
    revision: u64,
    outcome: Apply,
    held: bool,
    now: Timestamp,
) -> Plan<K::Status> {
    let waiting = job
        .meta()
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
            let shown = job.shown();
            let failed = K::failed(&shown, REMOTE_REJECTED, &message, now);
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
pub fn after_cleanup<S>(cluster: &str, outcome: Cleanup, cluster_lost: bool) -> Plan<S> {
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
pub fn after_withdrawal<K: RelayedKind>(
    job: &K,
    cluster: &str,
    outcome: Cleanup,
    cluster_lost: bool,
    withdrawal: &Withdrawal,
    now: Timestamp,
) -> Plan<K::Status> {
    let gone = match outcome {
        Cleanup::Gone { .. } => true,
        Cleanup::Disconnected => cluster_lost,
        Cleanup::Started { first: true } => {
            let reason = match withdrawal.unschedulable {
                true => Reason::MirrorUnschedulable,
                false => Reason::MirrorWithdrawalStarted,
            };
            return Plan::then(Some(AWAIT_AGENT)).with(Effect::Event(
                reason,
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
    let again = match lifecycle(job) {
        Lifecycle::Suspended => "; the Job is placed again when Kueue admits it",
        _ => "; the Job is placed again on a connected cluster",
    };
    let next = match &avoid_until {
        Some(until) => format!("{again}, avoiding cluster {cluster} until {until}"),
        None => again.to_string(),
    };
    let shown = job.shown();
    Plan::then(None)
        .with(Effect::WriteStatus(K::after_suspension(&shown)))
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
pub fn show_loss<K: RelayedKind>(
    job: &K,
    cluster: &str,
    lost: &LostMirror,
    limit: u32,
    now: Timestamp,
) -> Plan<K::Status> {
    let step = on_lost(lifecycle(job), &lost_so_far(job), &lost.mirror_uid, limit);
    let count = match step {
        LostStep::AlreadyShown | LostStep::CleanUpOnly => {
            return Plan::then(Some(Duration::ZERO)).with(Effect::LossShown);
        }
        LostStep::RunAgain { lost } | LostStep::Fail { lost } => lost,
    };
    let shown = job.shown();
    let what = format!(
        "the mirror on cluster {cluster} was lost: {}",
        lost.observed
    );
    let (status, note) = if let LostStep::Fail { .. } = step {
        let message = format!(
            "{what}; that is {count} lost of {limit} allowed (mirrorLostLimit), so the Job is not run again"
        );
        let failed = K::failed(&shown, REMOTE_JOB_LOST, &message, now);
        (failed, message)
    } else {
        let note = format!(
            "{what}; it runs again as attempt {} of {limit} once the worker shows none of its Pods",
            count + 1
        );
        (K::after_suspension(&shown), note)
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

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
