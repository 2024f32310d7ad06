//! Names shared by manager and agent. Changing any of them is a change of the
//! contract in `DESIGN.md`.

/// Value of `spec.managedBy` on manager Jobs that jobrelay mirrors.
pub const MANAGED_BY: &str = "jobrelay.dev/manager";

/// Finalizer on the manager Job, held until the worker reported the mirror gone.
pub const REMOTE_CLEANUP_FINALIZER: &str = "jobrelay.dev/remote-cleanup";

/// Annotation on the manager Job naming the worker cluster it was sent to;
/// also a label a user may set to pin a Job to a cluster.
pub const CLUSTER_KEY: &str = "jobrelay.dev/cluster";

/// Annotation on the manager Job beside [`CLUSTER_KEY`]: the manager's seal
/// of that record, which only it can make; never copied to a mirror.
pub const PLACEMENT_SEAL_ANNOTATION: &str = "jobrelay.dev/placement-seal";

/// Label on mirror Jobs and their Pods: the identity of the manager.
pub const ORIGIN_LABEL: &str = "jobrelay.dev/origin";

/// Label on mirror Jobs and their Pods: the UID of the manager Job.
pub const ORIGIN_UID_LABEL: &str = "jobrelay.dev/origin-uid";

/// Annotation on mirror Jobs: the manager Job revision they were applied from.
pub const REVISION_ANNOTATION: &str = "jobrelay.dev/revision";

/// Annotation a user may set on a manager Job: how long to keep its worker Job
/// and Pods after it finished (a duration such as `10m`), overriding
/// `retention.remoteAfterFinished`.
pub const REMOTE_RETENTION_ANNOTATION: &str = "jobrelay.dev/remote-after-finished";

/// Annotation on a manager Job that jobrelay deactivated: when (RFC 3339).
pub const DEACTIVATED_ANNOTATION: &str = "jobrelay.dev/deactivated-at";

/// Annotation on mirror Jobs: the owner of the manager Job (`CronJob/<name>`),
/// kept as a record since owner references do not cross clusters.
pub const OWNER_ANNOTATION: &str = "jobrelay.dev/manager-owner";

/// Annotation on a manager Job: how many of its mirrors were lost behind
/// jobrelay's back; at `mirrorLostLimit` the Job ends `Failed`.
pub const MIRRORS_LOST_ANNOTATION: &str = "jobrelay.dev/mirrors-lost";

/// Annotation on a manager Job: the worker UID of the last lost mirror, so a
/// loss reported twice (after a reconnect) is counted once.
pub const LAST_LOST_MIRROR_ANNOTATION: &str = "jobrelay.dev/last-lost-mirror";

/// Annotation on a manager Job its worker refused for a reason that can clear:
/// the reason, cluster and message, while the agent retries with backoff.
pub const DISPATCH_WAITING_ANNOTATION: &str = "jobrelay.dev/dispatch-waiting";

/// Annotation on a manager Job: why Pods of its mirror wait or failed on
/// its worker (the cluster, and for each reason how many Pods, the
/// container, the exit code and one Pod's message); absent while none does.
/// For `kubectl get -o custom-columns`.
pub const PODS_ANNOTATION: &str = "jobrelay.dev/pods";

/// Condition reason of a manager Job that failed because its mirrors were
/// lost `mirrorLostLimit` times.
pub const REMOTE_JOB_LOST: &str = "RemoteJobLost";

/// Condition reason of a manager Job whose worker refused it for good.
pub const REMOTE_REJECTED: &str = "RemoteRejected";

/// Label on each mirror Job naming the manager instance whose session
/// created it (see [`crate::instance`]).
pub const MANAGER_INSTANCE_LABEL: &str = "jobrelay.dev/manager-instance";

/// Label the leading manager replica puts on its own Pod (value `"true"`),
/// so the Service agents dial selects the leader alone.
pub const LEADER_LABEL: &str = "jobrelay.dev/leader";

/// Kueue's label naming a Job's LocalQueue. A mirror keeps it only on a
/// worker cluster that runs its own Kueue for jobrelay; there the worker's
/// Kueue owns the mirror's `suspend` and pod template.
pub const QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// Annotation on a manager Job: the worker clusters whose Kueue did not
/// admit its mirror in time (comma-separated); placement tries others first.
pub const NOT_ADMITTED_BY_ANNOTATION: &str = "jobrelay.dev/not-admitted-by";
/// Annotation on a manager Job: the cluster its mirror was last withdrawn
/// from (Kueue evicted it there); placement tries that cluster last.
pub const WITHDRAWN_FROM_ANNOTATION: &str = "jobrelay.dev/withdrawn-from";
/// Annotation on a manager Job: until when (RFC 3339) placement avoids the
/// cluster in [`WITHDRAWN_FROM_ANNOTATION`], where the Job's Pods did not
/// become ready.
pub const AVOID_UNTIL_ANNOTATION: &str = "jobrelay.dev/avoid-until";

/// Annotation a user may set on a manager Job: `"always"` moves its mirror
/// off a cluster where its Pods stay unschedulable for the cluster's
/// `unschedulableTimeout` even after a Pod of it ran there; without it, a
/// mirror is moved only while none of its Pods ever ran.
pub const MOVE_WHEN_UNSCHEDULABLE_ANNOTATION: &str = "jobrelay.dev/move-when-unschedulable";

/// Annotation on a manager Job placed under a Kueue quota reservation: the
/// node labels and tolerations its assigned ResourceFlavors add to each pod
/// set's template on admission, by pod set (JSON `{"podSets": {"<pod set>":
/// {"nodeSelector": {…}, "tolerations": […]}}}`, without what that template
/// already had; a JobSet's pod sets are its replicated Jobs, by name; a
/// record of one `{"nodeSelector", "tolerations"}` is read as every pod
/// set's). Unless the manager
/// runs with `--kueue-flavors-on-mirrors`, exactly these are left out of the
/// mirror: on the manager the flavors are quota, on the worker its own
/// scheduler places the Pods.
pub const FLAVORS_ANNOTATION: &str = "jobrelay.dev/kueue-flavors";

/// Kueue's scheduling gate for Topology Aware Scheduling: Kueue's own
/// controller on the manager cluster lifts it per Pod, so nothing would on a
/// worker. Never on a mirror's pod template.
pub const TOPOLOGY_SCHEDULING_GATE: &str = "kueue.x-k8s.io/topology";

/// Whether a `batch/v1` Job condition of type `type_` with status `status`
/// means the Job finished: `Complete` or `Failed`, and true.
pub fn ends_job(type_: &str, status: &str) -> bool {
    matches!(type_, "Complete" | "Failed") && status == "True"
}

/// The group of jobrelay's aggregated API on the manager, served through the
/// API server (an `APIService`): the logs of a relayed Job's Pods, read
/// through its worker's agent.
pub const VISIBILITY_GROUP: &str = "visibility.jobrelay.dev";
/// Its one version.
pub const VISIBILITY_VERSION: &str = "v1alpha1";

/// The path of the logs of the relayed Job `name` in `namespace`, as the API
/// server serves it: `GET` with kubectl's `pods/log` parameters
/// (`container`, `follow`, `tailLines`, `sinceSeconds`, `previous`,
/// `timestamps`) and jobrelay's `pod` and `allPods`. Authorised as the verb
/// `get` on the subresource `jobs/log` of [`VISIBILITY_GROUP`].
pub fn job_log_path(namespace: &str, name: &str) -> String {
    format!("/apis/{VISIBILITY_GROUP}/{VISIBILITY_VERSION}/namespaces/{namespace}/jobs/{name}/log")
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_true_complete_or_failed_condition_ends_a_job() {
        assert!(super::ends_job("Complete", "True"));
        assert!(super::ends_job("Failed", "True"));
        assert!(!super::ends_job("Failed", "False"));
        assert!(!super::ends_job("SuccessCriteriaMet", "True"));
        assert!(!super::ends_job("Suspended", "True"));
    }
}
