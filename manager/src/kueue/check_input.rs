//! What jobrelay knows of one Workload that lists its check and of the Job
//! that owns it: plain data, gathered by the controller from its caches and
//! the fleet, decided on by [`super::check::decide`].

use std::time::Duration;

use super::parameters::Allowed;
use super::retry::RuledOut;
use super::types::CheckState;
use crate::job::refused::Refused;
use crate::job::stuck::Waiting;

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
    /// What holds its mirror's deletion: Pods held Terminating on a node
    /// that is not Ready, in words ([`crate::job::held_pods::holding_quota`]).
    pub pods_held: Option<String>,
    /// Why its mirror's Pods wait or failed on its cluster, as the agent
    /// last said, in words ([`crate::job::pods_why::annotation`]).
    pub pods_why: Option<String>,
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
    pub(super) fn queued_mirror(&self) -> QueuedMirror {
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
