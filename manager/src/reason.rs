//! Why an Event is recorded: one reason per step of a mirror's life, and
//! the warnings about WorkerClusters and the Lease.

/// The steps a user sees in `kubectl describe job`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    Dispatched,
    RemoteFinished,
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
    /// The mirror is being withdrawn (the manager's Kueue evicted the Job,
    /// its cluster is Lost, or the worker's Kueue did not admit it in time).
    MirrorWithdrawalStarted,
    /// The withdrawn mirror and its Pods are gone (or its cluster is Lost)
    /// and the Job unplaced; it is placed again when Kueue admits it.
    MirrorWithdrawn,
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
            Reason::RemoteFinished => "RemoteFinished",
            Reason::RemoteCleanupStarted => "RemoteCleanupStarted",
            Reason::RemotePodsGone => "RemotePodsGone",
            Reason::RemoteRejected => "RemoteRejected",
            Reason::DispatchWaiting => "DispatchWaiting",
            Reason::RemoteJobLost => "RemoteJobLost",
            Reason::ClusterLost => "ClusterLost",
            Reason::Unplaceable => "Unplaceable",
            Reason::MirrorWithdrawalStarted => "MirrorWithdrawalStarted",
            Reason::MirrorWithdrawn => "MirrorWithdrawn",
            Reason::LeaderElection => "LeaderElection",
            Reason::AdmissionCheckRejected => "AdmissionCheckRejected",
            Reason::ManagerInstanceRefused => "ManagerInstanceRefused",
            Reason::DeletionsHeld => "DeletionsHeld",
        }
    }

    /// `Warning` or `Normal`.
    pub(super) fn event_type(self) -> &'static str {
        match self {
            Reason::RemoteRejected
            | Reason::DispatchWaiting
            | Reason::RemoteJobLost
            | Reason::ClusterLost
            | Reason::Unplaceable
            | Reason::AdmissionCheckRejected
            | Reason::ManagerInstanceRefused
            | Reason::DeletionsHeld => "Warning",
            _ => "Normal",
        }
    }
}
