//! A refusal that may clear moves on: the worker chosen first refuses the
//! mirror (its namespace is missing there); the check says so while its
//! agent tries again, and after the cluster's `refusedRetryTimeout` the
//! Workload goes back to Kueue and the Job completes on another worker.

use super::*;
use jobrelay_proto::wire::DISPATCH_WAITING_ANNOTATION;

/// worker-2's `refusedRetryTimeout` in this test.
const SHORT_TIMEOUT: &str = "15s";

#[tokio::test]
async fn a_job_refused_for_a_missing_namespace_moves_on_and_completes_elsewhere() {
    let (clusters, relay) = setup().await;
    let manager = kit::client(clusters.manager()).await;
    // The namespace is on the manager and worker-1 only.
    let ns = kit::namespace(&manager, "refused").await;
    let s = Scenario {
        clusters,
        relay,
        jobs: Api::namespaced(manager.clone(), &ns),
        ns,
    };
    kit::create_namespace(&kit::client(s.worker("worker-1")).await, &s.ns).await;
    let name = format!("refused-{}", s.ns);
    // worker-2 is tried first.
    check_of_set(
        &manager,
        &name,
        &["worker-2", "worker-1"],
        SetPlacement::InOrder,
    )
    .await;
    kueue_objects::queue(&manager, &s.ns, &s.ns, 2, &name)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    set_refused_retry_timeout(&manager, "worker-2", Some(SHORT_TIMEOUT)).await;

    s.create(queued_job(&s, "refused").run_for("1s")).await;
    let waiting = wait::until("the refusal shown on the Job", WAIT, || async {
        match s.jobs.get("refused").await {
            Ok(job) => match job.annotations().get(DISPATCH_WAITING_ANNOTATION) {
                Some(why) => Seen::Ready(why.clone()),
                None => Seen::Waiting("not refused yet".into()),
            },
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    assert!(
        waiting.contains("cluster worker-2 refused the Job (REJECT_REASON_NAMESPACE_MISSING)"),
        "{waiting}"
    );
    // While its agent tries again, the check is Pending and says why.
    let workloads: Api<Workload> = Api::namespaced(manager.clone(), &s.ns);
    let workload = workload_of(&s, "refused").await.name_any();
    let pending = check_shows(&workloads, (&workload, &name), "Pending, saying why", |c| {
        c.state == Some(CheckState::Pending) && c.message.is_some()
    })
    .await
    .message
    .unwrap_or_default();
    for expected in [
        "cluster worker-2 refused the Job (REJECT_REASON_NAMESPACE_MISSING)",
        "its agent tries again",
        "refusedRetryTimeout (15s)",
    ] {
        assert!(pending.contains(expected), "{expected:?} in {pending:?}");
    }

    // Refused for the timeout: the Job goes on to worker-1 and completes.
    s.wait_condition("refused", "Complete").await;
    let job = s.jobs.get("refused").await.expect("get");
    assert_eq!(
        job.annotations().get(CLUSTER_KEY).map(String::as_str),
        Some("worker-1")
    );
    assert_eq!(
        job.annotations()
            .get(WITHDRAWN_FROM_ANNOTATION)
            .map(String::as_str),
        Some("worker-2")
    );
    let events = s.events("refused").await;
    assert!(
        events
            .iter()
            .any(|(reason, note)| reason == "MirrorWithdrawalStarted"
                && note.contains("its refusedRetryTimeout is 15s")
                && note.contains("worker-2 tried last")),
        "{events:?}"
    );
    set_refused_retry_timeout(&manager, "worker-2", None).await;
    s.finish(WAIT).await;
    quota_back_to_zero(&s).await;
    drop_check_of_set(&manager, &name).await;
}

/// Sets `cluster`'s `spec.refusedRetryTimeout` (`None`: the default).
async fn set_refused_retry_timeout(client: &kube::Client, cluster: &str, timeout: Option<&str>) {
    let clusters: Api<WorkerCluster> = Api::all(client.clone());
    let patch = json!({"spec": {"refusedRetryTimeout": timeout}});
    clusters
        .patch(cluster, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("patching WorkerCluster {cluster}: {e}"));
}
