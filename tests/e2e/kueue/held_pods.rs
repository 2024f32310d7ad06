//! An evicted Workload whose mirror keeps a Pod Terminating on a node that
//! stopped answering: Kueue keeps the quota until that Pod is gone, and
//! jobrelay's check says which Pod on which node keeps it — until the
//! WorkerCluster opts in with `terminatingPodTimeout`; then the agent
//! forces the Pod and the quota is released.

use super::*;

/// Waits until the Workload `name` shows or drops its quota (`reserved`)
/// within `within`; its check's message then.
async fn quota(
    workloads: &Api<Workload>,
    name: &str,
    reserved: bool,
    within: Duration,
) -> Result<String, wait::Timeout> {
    wait::try_until(format!("QuotaReserved {reserved}"), within, || async {
        match workloads.get(name).await {
            Ok(w) if w.has("QuotaReserved") == reserved => Seen::Ready(
                w.check(CHECK)
                    .and_then(|c| c.message.clone())
                    .unwrap_or_default(),
            ),
            Ok(w) => Seen::Waiting(format!("{:?}", w.check(CHECK))),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await
}

#[tokio::test]
async fn an_evicted_workload_whose_pod_is_held_on_a_dead_node_says_which_until_the_agent_forces_it()
{
    let s = queued("held-pod", 1).await;
    let node = s.stranding_node("worker-2").await;
    let uid = s.create(node.runs(queued_job(&s, "stranded"))).await;
    node.strand(&uid).await;
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    let name = workload_of(&s, "stranded").await.name_any();
    set_active(&workloads, &name, false).await;
    let pod = node.overdue(&uid).await;

    // Off: Kueue keeps the quota, and the check says which Pod keeps it.
    let check = check_shows(&workloads, (&name, CHECK), "naming the Pod held", |c| {
        c.message.as_deref().is_some_and(|m| m.contains(&pod))
    })
    .await;
    let message = check.message.unwrap_or_default();
    assert_eq!(check.state, Some(CheckState::Pending), "{message}");
    for part in [
        "Kueue evicted the Workload".to_string(),
        format!(
            "Kueue keeps the Workload's quota until its mirror's Pods are gone from cluster worker-2, and 1 Pod is held Terminating on a node that is not Ready: {pod} on node {}",
            node.node
        ),
        "set WorkerCluster worker-2 spec.terminatingPodTimeout".to_string(),
    ] {
        assert!(message.contains(&part), "{part:?} in {message:?}");
    }
    let released = quota(&workloads, &name, false, Duration::from_secs(8)).await;
    assert!(released.is_err(), "quota released while the Pod was held");
    assert_eq!(node.pods_of(&uid).await.len(), 1, "still Terminating");

    // Opted in: the agent forces the Pod, and Kueue releases the quota.
    node.set_timeout(&s, Some("3s")).await;
    quota(&workloads, &name, false, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(node.pods_of(&uid).await.len(), 0, "the Pod was forced");
    node.remove(&s).await;
    s.finish(WAIT).await;
    quota_back_to_zero(&s).await;
}
