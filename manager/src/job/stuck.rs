//! A mirror that cannot start is moved: when every Pod of a running Job's
//! mirror has waited on its cluster with no node found (Pending,
//! unschedulable, as the agent reports) for the cluster's
//! `unschedulableTimeout`, and no Pod of it ever ran there, the mirror is
//! withdrawn — deleted, Pods first — and the Job placed again, that cluster
//! tried last. A Job annotated `jobrelay.dev/move-when-unschedulable:
//! "always"` moves even after a Pod of it ran, as long as none runs now.
//! Pure, like [`super::life`].
//!
//! "Ran" is read from the copied status: a Pod ready, succeeded or failed
//! (see [`PodCounts::one_ran`]); "every Pod" means the Pods waiting number
//! at least the status's `active` and none is ready.

use std::time::{Duration, Instant};

use jobrelay_proto::wire::MOVE_WHEN_UNSCHEDULABLE_ANNOTATION;

use super::life::Step;
use super::withdrawal::Withdrawal;
use crate::kinds::PodCounts;
use crate::mirror::{Mirror, Unschedulable};

/// The value of [`MOVE_WHEN_UNSCHEDULABLE_ANNOTATION`] that moves a mirror
/// even after a Pod of it ran.
pub const ALWAYS: &str = "always";

/// What decides whether a Job's mirror moves off its cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoveRules {
    /// jobrelay itself may place the Job again: it is running, no Kueue on
    /// the manager decides where it runs, and no label pins it.
    pub movable: bool,
    /// The Job's annotation moves it even after a Pod of it ran.
    pub even_after_a_pod_ran: bool,
    /// The cluster's `unschedulableTimeout`.
    pub timeout: Duration,
}

/// Whether `job`'s annotation moves it even after a Pod of it ran.
pub fn moves_even_after_a_pod_ran<K: kube::Resource>(job: &K) -> bool {
    job.meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(MOVE_WHEN_UNSCHEDULABLE_ANNOTATION))
        .is_some_and(|value| value == ALWAYS)
}

/// What the mirror's Pods come to: they start (or nothing waits), they all
/// wait for a node but not yet for the timeout, or the mirror moves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Waiting {
    #[default]
    No,
    /// Look again after this long.
    For(Duration),
    /// The mirror moves, for this reason.
    TooLong(String),
}

/// Whether every Pod of the mirror on `cluster` waits for a node, and for
/// how long: `counts` is what its copied status counts of its Pods.
pub fn waiting(
    cluster: &str,
    unschedulable: Option<&Unschedulable>,
    counts: Option<PodCounts>,
    rules: &MoveRules,
    now: Instant,
) -> Waiting {
    let (Some(stuck), Some(counts)) = (unschedulable, counts) else {
        return Waiting::No;
    };
    let one_ran = counts.one_ran();
    let all_wait = stuck.pods > 0 && stuck.pods >= counts.active && counts.ready == 0;
    if !rules.movable || !all_wait || (one_ran && !rules.even_after_a_pod_ran) {
        return Waiting::No;
    }
    let waited = now.saturating_duration_since(stuck.since);
    if let Some(left) = rules.timeout.checked_sub(waited).filter(|d| !d.is_zero()) {
        return Waiting::For(left);
    }
    let ran = match one_ran {
        true => {
            "a Pod of it ran there before (the Job's jobrelay.dev/move-when-unschedulable is \"always\")"
        }
        false => "none of them ever ran there",
    };
    Waiting::TooLong(format!(
        "{} Pods found no node on cluster {cluster} for {}s (its unschedulableTimeout is {}s) and {ran}; the scheduler says: {}; the Job is placed again, cluster {cluster} tried last",
        stuck.pods,
        waited.as_secs(),
        rules.timeout.as_secs(),
        stuck.message,
    ))
}

/// A Job whose mirror's Pods waited too long for a node has it withdrawn;
/// one whose Pods wait still is looked at again when the timeout runs out
/// (the second value). Only a Job being applied on its cluster moves. A
/// move once begun (`under_way`) goes on until the Job is unplaced: the
/// mirror being deleted, then gone, no longer says its Pods wait.
pub fn moved_when_unschedulable(
    step: Step,
    mirror: Option<&Mirror>,
    counts: Option<PodCounts>,
    rules: &MoveRules,
    under_way: Option<Withdrawal>,
    now: Instant,
) -> (Step, Option<Duration>) {
    let Step::Apply { cluster } = step else {
        return (step, None);
    };
    if let Some(withdrawal) = under_way.filter(|w| w.unschedulable) {
        return (Step::withdraw(cluster, withdrawal), None);
    }
    let unschedulable = mirror
        .and_then(|m| m.state.held())
        .and_then(|held| held.unschedulable.as_ref());
    match waiting(&cluster, unschedulable, counts, rules, now) {
        Waiting::No => (Step::Apply { cluster }, None),
        Waiting::For(left) => (Step::Apply { cluster }, Some(left)),
        Waiting::TooLong(why) => {
            let unschedulable = Withdrawal {
                why,
                unschedulable: true,
                ..Withdrawal::default()
            };
            (Step::withdraw(cluster, unschedulable), None)
        }
    }
}

#[cfg(test)]
#[path = "stuck_tests.rs"]
mod tests;
