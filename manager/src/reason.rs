//! Why an Event is recorded: one reason per step of a mirror's life, and
//! the warnings about WorkerClusters and the Lease; and which of them a
//! manager records (`--job-events`).

/// The steps a user sees in `kubectl describe job`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    Dispatched,
    /// The Job succeeded on its worker.
    RemoteFinished,
    /// The Job failed on its worker: `RemoteFinished` too, as a warning.
    RemoteFailed,
    RemoteCleanupStarted,
    RemotePodsGone,
    /// The worker refused the Job for good; it fails.
    RemoteRejected,
    /// The worker refused the Job for a reason that can clear; its agent
    /// tries again.
    DispatchWaiting,
    /// The mirror was removed behind jobrelay's back.
    RemoteJobLost,
    ClusterLost,
    /// No registered cluster can take the Job as it is pinned.
    Unplaceable,
    /// No cluster that takes the Job has room for its Pods now; it waits on
    /// the manager.
    NoRoom,
    /// The mirror is being withdrawn (the manager's Kueue evicted the Job,
    /// its cluster is Lost, or the worker's Kueue did not admit it in time).
    MirrorWithdrawalStarted,
    /// The mirror's Pods found no node on its cluster for the cluster's
    /// `unschedulableTimeout`: it is being withdrawn, to be placed on
    /// another cluster.
    MirrorUnschedulable,
    /// Pods of the mirror are held Terminating on a node that is not
    /// Ready: they hold the Job (and, behind Kueue, its quota).
    PodsStuckTerminating,
    /// Pods of the mirror wait on its worker for a reason (their image not
    /// pulled, their container restarting, no node found).
    PodsWaiting,
    /// Pods of the mirror failed on its worker (a non-zero exit code,
    /// OOMKilled, Evicted, DeadlineExceeded).
    PodsFailed,
    /// A Warning Event on the worker about the mirror or its Pods, passed
    /// on by the agent.
    WorkerWarning,
    /// The withdrawn mirror and its Pods are gone (or its cluster is Lost)
    /// and the Job unplaced; it is placed again when Kueue admits it.
    MirrorWithdrawn,
    /// The Job's `jobrelay.dev/cluster` annotation was written by someone
    /// other than jobrelay: ignored, and jobrelay's record written back.
    PlacementRecordRestored,
    /// A manager replica took the Lease (on the Lease).
    LeaderElection,
    /// jobrelay's Kueue admission check rejected the Job's Workload.
    AdmissionCheckRejected,
    /// The worker holds mirrors another manager instance of this origin
    /// made; no session (on the WorkerCluster).
    ManagerInstanceRefused,
    /// The agent's brake on mass deletion holds mirrors this manager's
    /// DesiredSet would delete (on the WorkerCluster).
    DeletionsHeld,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Dispatched => "Dispatched",
            Reason::RemoteFinished | Reason::RemoteFailed => "RemoteFinished",
            Reason::RemoteCleanupStarted => "RemoteCleanupStarted",
            Reason::RemotePodsGone => "RemotePodsGone",
            Reason::RemoteRejected => "RemoteRejected",
            Reason::DispatchWaiting => "DispatchWaiting",
            Reason::RemoteJobLost => "RemoteJobLost",
            Reason::ClusterLost => "ClusterLost",
            Reason::Unplaceable => "Unplaceable",
            Reason::NoRoom => "NoRoom",
            Reason::MirrorWithdrawalStarted => "MirrorWithdrawalStarted",
            Reason::MirrorWithdrawn => "MirrorWithdrawn",
            Reason::MirrorUnschedulable => "MirrorUnschedulable",
            Reason::PodsStuckTerminating => "PodsStuckTerminating",
            Reason::PodsWaiting => "PodsWaiting",
            Reason::PodsFailed => "PodsFailed",
            Reason::WorkerWarning => "WorkerWarning",
            Reason::PlacementRecordRestored => "PlacementRecordRestored",
            Reason::LeaderElection => "LeaderElection",
            Reason::AdmissionCheckRejected => "AdmissionCheckRejected",
            Reason::ManagerInstanceRefused => "ManagerInstanceRefused",
            Reason::DeletionsHeld => "DeletionsHeld",
        }
    }

    /// `Warning` or `Normal`.
    pub(super) fn event_type(self) -> &'static str {
        match self {
            Reason::RemoteFailed
            | Reason::RemoteRejected
            | Reason::DispatchWaiting
            | Reason::RemoteJobLost
            | Reason::ClusterLost
            | Reason::Unplaceable
            | Reason::NoRoom
            | Reason::MirrorUnschedulable
            | Reason::PodsStuckTerminating
            | Reason::PodsWaiting
            | Reason::PodsFailed
            | Reason::WorkerWarning
            | Reason::PlacementRecordRestored
            | Reason::AdmissionCheckRejected
            | Reason::ManagerInstanceRefused
            | Reason::DeletionsHeld => "Warning",
            _ => "Normal",
        }
    }
}

/// Which Events the manager records on the Jobs it relays
/// (`--job-events`). Refusals, losses, failures, withdrawals and what
/// concerns WorkerClusters and the Lease are recorded either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum JobEvents {
    /// Every step too: where the Job went, how it ended there, and that its
    /// remote cleanup began and was confirmed.
    #[default]
    Steps,
    /// Only what went wrong or changed the Job's course: a Job that runs to
    /// completion costs no Event, its status shows each step.
    Problems,
}

impl JobEvents {
    /// Whether an Event of `reason` is recorded.
    pub fn records(self, reason: Reason) -> bool {
        let step = matches!(
            reason,
            Reason::Dispatched
                | Reason::RemoteFinished
                | Reason::RemoteCleanupStarted
                | Reason::RemotePodsGone
        );
        self == JobEvents::Steps || !step
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEPS: [Reason; 4] = [
        Reason::Dispatched,
        Reason::RemoteFinished,
        Reason::RemoteCleanupStarted,
        Reason::RemotePodsGone,
    ];

    const PROBLEMS: [Reason; 19] = [
        Reason::RemoteFailed,
        Reason::RemoteRejected,
        Reason::DispatchWaiting,
        Reason::RemoteJobLost,
        Reason::ClusterLost,
        Reason::Unplaceable,
        Reason::NoRoom,
        Reason::MirrorWithdrawalStarted,
        Reason::MirrorUnschedulable,
        Reason::PodsStuckTerminating,
        Reason::PodsWaiting,
        Reason::PodsFailed,
        Reason::WorkerWarning,
        Reason::MirrorWithdrawn,
        Reason::PlacementRecordRestored,
        Reason::LeaderElection,
        Reason::AdmissionCheckRejected,
        Reason::ManagerInstanceRefused,
        Reason::DeletionsHeld,
    ];

    #[test]
    fn steps_records_every_event() {
        for reason in STEPS.into_iter().chain(PROBLEMS) {
            assert!(JobEvents::Steps.records(reason), "{reason:?}");
        }
    }

    #[test]
    fn problems_leaves_out_the_steps_of_a_job_that_succeeds() {
        for reason in STEPS {
            assert!(!JobEvents::Problems.records(reason), "{reason:?}");
        }
    }

    #[test]
    fn problems_records_refusals_losses_failures_and_withdrawals() {
        for reason in PROBLEMS {
            assert!(JobEvents::Problems.records(reason), "{reason:?}");
        }
    }

    #[test]
    fn a_failure_is_a_remote_finished_warning() {
        assert_eq!(Reason::RemoteFailed.as_str(), "RemoteFinished");
        assert_eq!(Reason::RemoteFailed.event_type(), "Warning");
        assert_eq!(Reason::RemoteFinished.event_type(), "Normal");
    }
}
