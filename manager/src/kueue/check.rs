//! What jobrelay answers on its admission check, as a pure decision: the
//! state of one Workload's check ([`decide`]). What a check's parameters
//! allow is [`super::parameters`]; whether it is usable at all,
//! [`super::active`].

use std::time::Duration;

pub use super::retry::{RETRY_AFTER, RETRY_AFTER_AT_MOST, RuledOut, retry_after};
use crate::job::refused::Refused;
use crate::job::stuck::Waiting;

pub use super::active::{Reach, active};
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

/// A Job placed on a cluster that runs its own Kueue for jobrelay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerKueueSide {
    /// Where the mirror stands in that Kueue.
    pub mirror: QueuedMirror,
    /// How long that Kueue may take to admit it (`spec.kueue.admitWithin`).
    pub admit_within: Duration,
}

/// Where a mirror queued in its worker's own Kueue stands there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueuedMirror {
    /// Not held there (yet, or any more).
    NotHeld,
    /// Held suspended: waiting for that Kueue to admit it or, once admitted,
    /// evicted by it (preempted, deactivated, Pods not ready in time).
    Suspended,
    /// That Kueue unsuspended it: it runs, or finished.
    Admitted,
}

/// Where a Workload's Job stands with jobrelay.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobSide {
    /// The cluster recorded on the Job, if placed.
    pub cluster: Option<String>,
    /// The Job's pinned cluster (label `jobrelay.dev/cluster`).
    pub pinned: Option<String>,
    /// The pinned cluster has an agent connected now.
    pub pinned_connected: bool,
    /// The worker reported holding the mirror.
    pub mirror_held: bool,
    /// The Job's recorded cluster has an agent connected now.
    pub cluster_connected: bool,
    /// The Job's recorded cluster is Lost: disconnected for longer than its
    /// `spec.lostAfter`.
    pub cluster_lost: bool,
    /// The Job's cluster runs its own Kueue, where the mirror is queued.
    pub worker_kueue: Option<WorkerKueueSide>,
    /// Its mirror is being withdrawn.
    pub withdrawing: bool,
    /// Whether its mirror's Pods all wait for a node on its cluster, and
    /// for how much longer until its `unschedulableTimeout` moves it (none
    /// of them having run) — or why it moves now, in words.
    pub unschedulable: Waiting,
    /// Whether its cluster refuses the mirror for a reason that can clear,
    /// and whether for its `refusedRetryTimeout` — in words.
    pub refused: Refused,
    /// The Job does not carry a record of the reservation's flavors yet
    /// (placed under another reservation, say, before an eviction): the
    /// mirror could not be built without them once Kueue admits it.
    pub flavors_to_record: bool,
}

impl JobSide {
    /// Where its mirror stands in its worker's Kueue (`NotHeld` where the
    /// mirror is not queued in one).
    fn queued_mirror(&self) -> QueuedMirror {
        self.worker_kueue
            .as_ref()
            .map_or(QueuedMirror::NotHeld, |worker| worker.mirror)
    }
}

/// What jobrelay knows of one Workload that lists its check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// `QuotaReserved` is true.
    pub quota_reserved: bool,
    /// `Finished` is true.
    pub finished: bool,
    /// `Evicted` is true: Kueue is stopping the Job and will release the
    /// quota once nothing runs (it sets `Evicted` false when it reserves
    /// quota again).
    pub evicted: bool,
    /// The `Evicted` condition's reason while it is true.
    pub evicted_for: String,
    /// The check's state in `status.admissionChecks`.
    pub state: Option<CheckState>,
    /// The owning Job, if the cache has it.
    pub job: Option<JobSide>,
    /// What the check's parameters allow, or what is wrong with them.
    pub allowed: Result<Allowed, String>,
    /// Some allowed cluster is connected, mirrors the Job's kind and admits
    /// its namespace (the one the Job is avoiding aside).
    pub placeable: bool,
    /// The cluster the Job avoids after its Pods did not become ready
    /// there, and until when.
    pub avoiding: Option<(String, String)>,
    /// How long jobrelay has been answering this reservation.
    pub reserved_for: Duration,
    /// Why jobrelay can never relay the Workload's owner, if it cannot
    /// ([`super::owner::not_ours`]).
    pub not_ours: Option<String>,
    /// What is short on each cluster that could take the Job, when
    /// placement found no room for it under this reservation.
    pub no_room: Option<String>,
    /// How many times Kueue saw the check go `Retry` (its `retryCount`).
    pub retries: u32,
    /// Each connected cluster the check allows that cannot take the Job,
    /// and why (the one it avoids aside).
    pub ruled_out: Vec<(String, RuledOut)>,
    /// The Job's namespace, when no registered WorkerCluster the check
    /// allows — connected or not — admits it (`spec.namespaceSelector`):
    /// only an administrator's change lets the Job run.
    pub namespace_admitted_nowhere: Option<String>,
}

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
        let why = match (input.evicted, input.evicted_for.as_str()) {
            (false, _) => "Kueue holds no quota for the Workload".to_string(),
            (true, "") => "Kueue evicted the Workload".to_string(),
            (true, reason) => format!("Kueue evicted the Workload ({reason})"),
        };
        return Some(CheckStep::Withdraw {
            why: format!(
                "{why}; it is placed afresh when Kueue admits it again, cluster {cluster} tried last"
            ),
            avoid: input.evicted && input.evicted_for == PODS_READY_TIMEOUT,
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

/// Why a Job whose cluster is Lost goes back to Kueue.
fn lost(cluster: &str) -> String {
    format!(
        "cluster {cluster} is Lost (disconnected for longer than its spec.lostAfter): the Job's mirror there is given up, to be deleted with its Pods by the agent when it returns, and the Job is placed again on another cluster"
    )
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
