//! The demo's JobSet: a one-Pod leader and three workers, relayed as one to
//! worker-1, the worker that runs the JobSet controller (worker-2 serves no
//! JobSets, so its agent does not take them).

use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::wire::{CLUSTER_KEY, MANAGED_BY, REMOTE_CLEANUP_FINALIZER};
use jobrelay_testbed::cluster::ClusterSet;
use jobrelay_testbed::controllers::jobset::JobSetController;
use jobrelay_testbed::objects::fixtures::{RUN_FOR, TERMINATE_AFTER, pod_spec};
use kube::ResourceExt;
use kube::api::Api;
use serde_json::json;

use super::{NAMESPACE, Row, Workers};

/// The JobSet's name.
pub const NAME: &str = "trainer";
/// The worker that runs the JobSet controller.
pub const WORKER: &str = "worker-1";

/// Starts the JobSet controller on [`WORKER`].
pub async fn start_controller(set: &ClusterSet) -> anyhow::Result<JobSetController> {
    JobSetController::start_on(set, WORKER).await
}

/// The JobSet: a leader and three workers whose Pods run for 8 seconds.
pub fn jobset() -> anyhow::Result<JobSet> {
    let pod = serde_json::to_value(pod_spec())?;
    let replicated = |job: &str, pods: u32| {
        json!({"name": job, "replicas": 1, "template": {"spec": {
            "parallelism": pods, "completions": pods, "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {RUN_FOR: "8s", TERMINATE_AFTER: "1s"}},
                "spec": pod,
            },
        }}})
    };
    Ok(serde_json::from_value(json!({
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "managedBy": MANAGED_BY,
            "replicatedJobs": [replicated("leader", 1), replicated("workers", 3)],
        },
    }))?)
}

/// The JobSet's row of the table.
pub async fn row(jobsets: &Api<JobSet>, workers: &Workers) -> anyhow::Result<Row> {
    let name = format!("{NAME}*");
    let Some(manager) = jobsets.get_opt(NAME).await? else {
        return Ok(Row::deleted(name));
    };
    let cluster = manager
        .annotations()
        .get(CLUSTER_KEY)
        .cloned()
        .unwrap_or_else(|| "-".into());
    let (remote, pods) = if cluster == "-" {
        ("-".into(), "-".into())
    } else {
        let uid = manager.uid().unwrap_or_default();
        let pods = workers.pods_of(&cluster, &uid).await?;
        let remote = match workers.jobset(&cluster, NAME).await? {
            Some(mirror) => describe(&mirror),
            None => "JobSet gone".into(),
        };
        (remote, pods)
    };
    let held = manager
        .finalizers()
        .iter()
        .any(|f| f == REMOTE_CLEANUP_FINALIZER);
    let state = describe(&manager);
    Ok(Row {
        name,
        queue: "-".into(),
        cluster,
        remote,
        pods,
        settled: !held && manager.is_finished(),
        manager: state,
        held,
    })
}

/// A JobSet's state: its terminal state, or running (its replicated Jobs'
/// counts).
fn describe(jobset: &JobSet) -> String {
    let status = jobset.status.clone().unwrap_or_default();
    let jobs = status.rest["replicatedJobsStatus"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let count = |field: &str| -> i64 { jobs.iter().filter_map(|j| j[field].as_i64()).sum() };
    let counts = format!(
        "Jobs active {} ok {} failed {}",
        count("active"),
        count("succeeded"),
        count("failed")
    );
    match status.terminal_state {
        Some(state) => format!("{state} ({counts})"),
        None if jobset.suspended() => format!("Suspended ({counts})"),
        None => format!("Running ({counts})"),
    }
}
