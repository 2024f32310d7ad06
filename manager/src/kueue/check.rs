//! What jobrelay answers on its admission check, as a pure decision: the
//! state of one Workload's check ([`decide`]). What a check's parameters
//! allow is [`super::parameters`]; whether it is usable at all,
//! [`super::active`].

use std::time::Duration;

pub use super::retry::{RETRY_AFTER, RETRY_AFTER_AT_MOST, RuledOut, retry_after};
use crate::job::refused::Refused;
use crate::job::stuck::Waiting;

pub use super::active::{Reach, active};
pub use super::check_input::{Input, JobSide, QueuedMirror, WorkerKueueSide};
pub use super::parameters::{Allowed, all_allowed, allowed};
pub use super::types::CheckState;

/// The state jobrelay answers for, of several jobrelay checks on one
/// Workload: `Pending` while any is, else the first one's (`None`: the
/// first is not listed yet, or in a state this version does not know).
pub fn joint_state(states: impl IntoIterator<Item = Option<CheckState>>) -> Option<CheckState> {
    let states: Vec<Option<CheckState>> = states.into_iter().collect();
    match states.contains(&Some(CheckState::Pending)) {
        true => Some(CheckState::Pending),
        false => states.first().copied().flatten(),
    }
}

/// How soon a Workload whose mirror is on its way is looked at again.
pub const AWAIT_MIRROR: Duration = Duration::from_secs(1);
/// How soon a Workload whose cluster is away is looked at again, to send
/// it back once that cluster is Lost.
pub const AWAIT_LOST: Duration = Duration::from_secs(5);
/// How often a Workload admitted through jobrelay's check is looked at, to
/// notice its cluster going away (nothing changes on the Workload then).
pub const WATCH_ADMITTED: Duration = Duration::from_secs(30);
/// The `Evicted` reason Kueue gives when a Job's Pods did not become ready
/// within `waitForPodsReady.timeout`.
pub const PODS_READY_TIMEOUT: &str = "PodsReadyTimeout";

/// The next thing to do about one Workload's check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckStep {
    /// Not jobrelay's turn: no quota, or the check is not Pending.
    Idle,
    /// Let the Job controller place the Job and apply its mirror
    /// suspended; look again after this long.
    Reserve(Duration),
    /// The mirror is on its way; look again after this long.
    Wait(Duration),
    /// The check stays `Pending`, saying why; look again after this long.
    Pending { message: String, after: Duration },
    /// Admitted and placed: nothing to write; look again after this long,
    /// to send it back if its cluster is Lost by then.
    Admitted(Duration),
    /// The mirror is held, suspended, on a worker.
    Ready(String),
    /// The check keeps its `state` and says `message`: why Kueue still
    /// holds the quota of an evicted Workload.
    Explain { state: CheckState, message: String },
    /// No worker can take it now; Kueue releases the quota and tries later.
    Retry { message: String, after: Duration },
    /// It can never go through this check.
    Rejected(String),
    /// Kueue evicted the Workload or holds no quota for it: have the mirror
    /// withdrawn (deleted, Pods first) and the Job unplaced, so that a
    /// readmission places it afresh — avoiding the cluster for a while when
    /// `avoid` (its Pods did not become ready there).
    Withdraw { why: String, avoid: bool },
    /// The worker's Kueue did not admit the mirror in time
    /// (`not_admitted`), or evicted it once admitted: have it withdrawn and
    /// send the Workload back (`Retry`), so placement can try another
    /// cluster.
    SendBack {
        message: String,
        after: Duration,
        not_admitted: bool,
    },
}

pub fn decide(input: &Input) -> CheckStep {
    if let Some(job) = &input.job
        && let Some(cluster) = &job.cluster
        && let Some(step) = after_admission(input, job, cluster)
    {
        return step;
    }
    if !input.quota_reserved
        || input.finished
        || input.evicted
        || input.state != Some(CheckState::Pending)
    {
        return CheckStep::Idle;
    }
    if let Some(why) = &input.not_ours {
        return CheckStep::Rejected(why.clone());
    }
    // Kueue holds back a ClusterQueue whose checks are not Active; a
    // Workload that got quota anyway is sent back.
    let allowed = match &input.allowed {
        Ok(allowed) => allowed,
        Err(why) => {
            return CheckStep::Retry {
                message: why.clone(),
                after: retry_after(input.retries),
            };
        }
    };
    let Some(job) = &input.job else {
        return CheckStep::Wait(AWAIT_MIRROR);
    };
    match &job.cluster {
        Some(cluster) => on_cluster(input, job, cluster, allowed),
        None => to_place(input, job, allowed),
    }
}

/// For a Job with a cluster, once Kueue reserved or admitted its Workload:
/// withdraws the mirror on eviction or lost quota, and watches an admitted
/// Job's cluster; `None` when the check's usual steps apply.
fn after_admission(input: &Input, job: &JobSide, cluster: &str) -> Option<CheckStep> {
    if !job.withdrawing && !input.finished && (input.evicted || !input.quota_reserved) {
        let mut why = match input.evicted {
            false => "Kueue holds no quota for the Workload".to_string(),
            true => evicted(input),
        };
        // Its Pods did not get ready in time: what they waited for.
        if input.evicted_for == PODS_READY_TIMEOUT
            && let Some(pods) = &job.pods_why
        {
            why = format!("{why}; its Pods on {pods}");
        }
        return Some(CheckStep::Withdraw {
            why: format!(
                "{why}; it is placed afresh when Kueue admits it again, cluster {cluster} tried last"
            ),
            avoid: input.evicted && input.evicted_for == PODS_READY_TIMEOUT,
        });
    }
    // Evicted, its mirror on its way out: Kueue keeps the quota until
    // the mirror's Pods are gone, and Pods held on a node that is not
    // Ready keep it there; the check says which.
    if job.withdrawing
        && input.evicted
        && !input.finished
        && let Some(message) = &job.pods_held
        && let Some(state @ (CheckState::Pending | CheckState::Ready)) = input.state
    {
        return Some(CheckStep::Explain {
            state,
            message: format!("{}; {message}", evicted(input)),
        });
    }
    // Admitted on a cluster that is gone for good: Kueue evicts it on
    // `Retry`, and the withdrawal then gives the mirror up. Only away,
    // it is looked at again until it is back or Lost.
    let admitted = input.quota_reserved && !input.evicted && !input.finished;
    if admitted && input.state == Some(CheckState::Ready) {
        return Some(match (job.cluster_connected, job.cluster_lost) {
            // Kueue evicts it on `Retry`, and the withdrawal then moves it.
            (true, _) if let Waiting::TooLong(why) = &job.unschedulable => CheckStep::Retry {
                message: why.clone(),
                after: RETRY_AFTER,
            },
            // Admitted there before the check went Ready, suspended since.
            (true, _) if !job.withdrawing && job.queued_mirror() == QueuedMirror::Suspended => {
                CheckStep::SendBack {
                    message: format!(
                        "cluster {cluster}'s Kueue evicted the mirror after admitting it (it suspended it: preempted there, deactivated, or its Pods not ready in time); the mirror is withdrawn and the Job placed afresh, cluster {cluster} tried last"
                    ),
                    after: RETRY_AFTER,
                    not_admitted: false,
                }
            }
            // Looked at again when the Pods that wait for a node would
            // have waited too long.
            (true, _) => CheckStep::Admitted(match job.unschedulable {
                Waiting::For(left) => left.min(WATCH_ADMITTED),
                Waiting::No | Waiting::TooLong(_) => WATCH_ADMITTED,
            }),
            (false, false) => CheckStep::Admitted(AWAIT_LOST),
            (false, true) => CheckStep::Retry {
                message: lost(cluster),
                after: RETRY_AFTER,
            },
        });
    }
    None
}

/// A pending check for a Job bound to `cluster` (its mirror is there, or
/// being sent there): ready once the mirror is held, and the worker's Kueue
/// admitted it where the cluster runs one.
fn on_cluster(input: &Input, job: &JobSide, cluster: &str, allowed: &Allowed) -> CheckStep {
    if job.cluster_lost {
        return CheckStep::Retry {
            message: lost(cluster),
            after: RETRY_AFTER,
        };
    }
    if job.withdrawing && job.cluster_connected {
        return CheckStep::Wait(AWAIT_MIRROR);
    }
    if !allowed.allows(cluster) {
        return CheckStep::Rejected(format!(
            "the Job is bound to cluster {cluster}, which this check does not allow ({})",
            allowed.describe()
        ));
    }
    if !job.cluster_connected {
        return CheckStep::Retry {
            message: format!("cluster {cluster}, where the Job's mirror is, is not connected"),
            after: RETRY_AFTER,
        };
    }
    match &job.refused {
        Refused::No => {}
        Refused::Waiting { why, again } => {
            return CheckStep::Pending {
                message: why.clone(),
                after: *again,
            };
        }
        Refused::TooLong(why) => {
            return CheckStep::SendBack {
                message: why.clone(),
                after: RETRY_AFTER,
                not_admitted: false,
            };
        }
    }
    if !job.mirror_held || job.flavors_to_record {
        return CheckStep::Reserve(AWAIT_MIRROR);
    }
    match &job.worker_kueue {
        None => CheckStep::Ready(format!(
            "the mirror is held on cluster {cluster}, suspended until the Job is admitted"
        )),
        Some(worker) if worker.mirror == QueuedMirror::Admitted => CheckStep::Ready(format!(
            "the mirror was admitted by cluster {cluster}'s Kueue"
        )),
        Some(worker) if input.reserved_for >= worker.admit_within => CheckStep::SendBack {
            message: format!(
                "cluster {cluster}'s Kueue did not admit the mirror within {}s (WorkerCluster spec.kueue.admitWithin); it is withdrawn and the Job placed again, on another cluster if one can take it",
                worker.admit_within.as_secs()
            ),
            after: RETRY_AFTER,
            not_admitted: true,
        },
        Some(worker) => CheckStep::Wait(worker.admit_within - input.reserved_for),
    }
}

/// A pending check for a Job not yet placed: sent back, saying why, when no
/// cluster can take it; else a cluster is reserved for it.
fn to_place(input: &Input, job: &JobSide, allowed: &Allowed) -> CheckStep {
    if let Some(pinned) = &job.pinned
        && !allowed.allows(pinned)
    {
        return CheckStep::Rejected(format!(
            "the Job is pinned to cluster {pinned} (label jobrelay.dev/cluster), which this check does not allow ({})",
            allowed.describe()
        ));
    }
    if let Some(pinned) = &job.pinned
        && !job.pinned_connected
    {
        return CheckStep::Retry {
            message: format!(
                "the Job is pinned to cluster {pinned} (label jobrelay.dev/cluster), which is not connected"
            ),
            after: retry_after(input.retries),
        };
    }
    if let Some(namespace) = &input.namespace_admitted_nowhere {
        return CheckStep::Rejected(format!(
            "no cluster this check allows ({}) admits namespace {namespace} (spec.namespaceSelector): Kueue deactivates the Workload, so it holds no quota and preempts nothing; once a WorkerCluster admits the namespace, set the Workload's spec.active to true",
            allowed.describe()
        ));
    }
    if !input.placeable {
        let mut message = match input.ruled_out.is_empty() {
            true => format!("no worker cluster ({}) is connected", allowed.describe()),
            false => format!(
                "no connected worker cluster ({}) admits the Job's namespace and mirrors its kind ({})",
                allowed.describe(),
                input
                    .ruled_out
                    .iter()
                    .map(|(cluster, why)| format!("{cluster}: {why}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        if let Some((avoided, until)) = &input.avoiding {
            message.push_str(&format!(
                " other than cluster {avoided}, which the Job avoids until {until}: Kueue evicted it there because its Pods did not become ready (waitForPodsReady)"
            ));
        }
        return CheckStep::Retry {
            message,
            after: retry_after(input.retries),
        };
    }
    if let Some(why) = &input.no_room {
        return CheckStep::Retry {
            message: format!(
                "no worker cluster ({}) has room for the Job's Pods now ({why}); Kueue tries again later",
                allowed.describe()
            ),
            after: RETRY_AFTER,
        };
    }
    CheckStep::Reserve(AWAIT_MIRROR)
}

/// Whether a change of the Workload's mirror must wake it after `step`:
/// admitted (its cluster may go, its Pods may find no node, its worker's
/// Kueue may evict it), or its mirror being withdrawn (Pods held on the
/// way out hold the quota).
pub fn watches_mirror(input: &Input, step: &CheckStep) -> bool {
    matches!(
        step,
        CheckStep::Admitted(_) | CheckStep::Explain { .. } | CheckStep::Withdraw { .. }
    ) || input.job.as_ref().is_some_and(|job| job.withdrawing)
}

/// That Kueue evicted the Workload, and why.
fn evicted(input: &Input) -> String {
    match input.evicted_for.as_str() {
        "" => "Kueue evicted the Workload".to_string(),
        reason => format!("Kueue evicted the Workload ({reason})"),
    }
}

/// Why a Job whose cluster is Lost goes back to Kueue.
fn lost(cluster: &str) -> String {
    format!(
        "cluster {cluster} is Lost (disconnected for longer than its spec.lostAfter): the Job's mirror there is given up, to be deleted with its Pods by the agent when it returns, and the Job is placed again on another cluster"
    )
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
