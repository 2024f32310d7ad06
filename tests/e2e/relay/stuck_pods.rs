//! A Pod stuck Terminating on a node that stopped answering: it holds its
//! deleted Job (the manager's finalizer waits for every Pod), and the Job
//! says which Pod on which node holds it, until the WorkerCluster opts in
//! with `terminatingPodTimeout`; then the agent force-deletes it and the
//! Job goes.

use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_testbed::wait::{self, Seen};
use kube::api::DeleteParams;
use std::time::Duration;

/// Waits until the manager Job `stranded` is gone, within `within`.
async fn manager_job_gone(s: &Scenario, within: Duration) -> Result<(), wait::Timeout> {
    wait::try_until("the manager Job gone", within, || async {
        match s.jobs.get_opt("stranded").await {
            Ok(None) => Seen::Ready(()),
            Ok(Some(job)) => Seen::Waiting(format!("finalizers {:?}", job.metadata.finalizers)),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await
}

#[tokio::test]
async fn a_pod_stuck_terminating_on_a_node_that_stopped_answering_is_forced_once_opted_in() {
    let s = Scenario::relayed("stuck-pod").await;
    let node = s.stranding_node("worker-1").await;
    let uid = s.create(node.runs(s.job("stranded"))).await;
    node.strand(&uid).await;
    s.jobs
        .delete("stranded", &DeleteParams::background())
        .await
        .expect("delete the manager Job");
    let pod = node.overdue(&uid).await;

    // Off: nothing removes it, the manager Job waits for it, and says why.
    let why = s.wait_event("stranded", "PodsStuckTerminating").await;
    for part in [
        format!(
            "1 Pod of the Job on cluster worker-1 is held Terminating on a node that is not Ready: {pod} on node {}",
            node.node
        ),
        "node.kubernetes.io/out-of-service".to_string(),
        "set WorkerCluster worker-1 spec.terminatingPodTimeout".to_string(),
    ] {
        assert!(why.contains(&part), "{part:?} in {why:?}");
    }
    let held = manager_job_gone(&s, Duration::from_secs(8)).await;
    assert!(held.is_err(), "the Job went while its Pod was Terminating");
    assert_eq!(node.pods_of(&uid).await.len(), 1, "still Terminating");

    // Opted in: the agent forces it, and the Job is released.
    node.set_timeout(&s, Some("3s")).await;
    manager_job_gone(&s, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(node.pods_of(&uid).await.len(), 0, "the Pod was forced");
    node.remove(&s).await;
    s.finish(WAIT).await;
}
