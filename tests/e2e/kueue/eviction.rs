//! Evictions: a higher priority preempting, a deactivated Workload, a Job
//! whose Pods never get ready on the worker it was placed on. The worker's
//! Pods always go before the quota is released, and the mirror is withdrawn
//! so a readmission places the Job afresh.

use super::*;
use jobrelay_kinds::room::pool::HOSTNAME_LABEL;

/// Held by the tests whose Pods find no node on worker-1 or worker-2 for a
/// while: one waits for Kueue's `waitForPodsReady`, the other shortens
/// worker-1's `unschedulableTimeout` below it, so they take turns.
static UNSCHEDULABLE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn a_high_priority_job_preempts_and_the_low_ones_worker_pods_go_first() {
    let s = queued("preempt", 1).await;
    let low = s
        .create(
            queued_job(&s, "low")
                .label(PRIORITY_CLASS, "low")
                .run_for("12s")
                .terminate_after("3s"),
        )
        .await;
    running_on_a_worker(&s, &low, "the low-priority Job").await;
    let high = s
        .create(
            queued_job(&s, "high")
                .label(PRIORITY_CLASS, "high")
                .run_for("3s"),
        )
        .await;
    wait::until(
        "the high-priority Job running, after every Pod of the low one is gone",
        WAIT,
        || async {
            let high_pods = live_worker_pods(&s).await.get(&high).copied().unwrap_or(0);
            let low_pods = match worker_pods_of(&s, &low).await {
                Ok(pods) => pods,
                Err(e) => return Seen::Waiting(e),
            };
            if high_pods > 0 {
                assert_eq!(
                    low_pods, 0,
                    "the high Job's mirror runs while {low_pods} Pod(s) of the preempted one remain"
                );
                return Seen::Ready(());
            }
            Seen::Waiting(format!("low has {low_pods} Pods, high none running"))
        },
    )
    .await;
    let evicted = workload_of(&s, "low").await;
    assert!(
        evicted.has("Evicted") || evicted.has("Requeued") || !evicted.has("Admitted"),
        "the low Workload was evicted: {:?}",
        evicted.status
    );
    let mut outcomes = BTreeMap::new();
    outcomes.insert("high".to_string(), "Complete");
    outcomes.insert("low".to_string(), "Complete");
    s.wait_outcomes(&outcomes, Duration::from_secs(150)).await;
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_deactivated_workload_stops_its_pods_then_frees_its_quota() {
    let s = queued("deactivate", 1).await;
    let uid = s
        .create(queued_job(&s, "paused").run_for("1h").terminate_after("3s"))
        .await;
    running_on_a_worker(&s, &uid, "the Job").await;
    let worker = s.assigned_worker("paused").await.name.clone();
    let workload = workload_of(&s, "paused").await;
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    set_active(&workloads, &workload.name_any(), false).await;
    wait::until(
        "quota released only once the worker's Pods are gone",
        WAIT,
        || async {
            // The Workload first: once it shows the quota released, no Pod
            // may be left (the Workload stays inactive, nothing new starts).
            let workload = match workloads.get(&workload.name_any()).await {
                Ok(w) => w,
                Err(e) => return Seen::Waiting(e.to_string()),
            };
            let pods = match worker_pods_of(&s, &uid).await {
                Ok(pods) => pods,
                Err(e) => return Seen::Waiting(e),
            };
            let reserved = workload.has("QuotaReserved");
            assert!(
                reserved || pods == 0,
                "quota released while {pods} Pod(s) remain on the worker"
            );
            let job = s.jobs.get("paused").await.expect("get");
            let suspended = job.spec.as_ref().and_then(|sp| sp.suspend) == Some(true);
            match (reserved, pods, suspended) {
                (false, 0, true) => Seen::Ready(()),
                _ => Seen::Waiting(format!(
                    "reserved {reserved}, {pods} worker Pods, suspended {suspended}"
                )),
            }
        },
    )
    .await;
    // Its mirror was withdrawn, not kept: a readmission places it afresh.
    let mirror: Api<Job> = s.worker_api(&worker).await;
    assert!(mirror.get_opt("paused").await.expect("get").is_none());
    let job = s.jobs.get("paused").await.expect("get");
    assert_eq!(job.annotations().get(CLUSTER_KEY), None, "unplaced");
    assert_eq!(
        job.annotations().get(WITHDRAWN_FROM_ANNOTATION),
        Some(&worker)
    );
    let note = s.wait_event("paused", "MirrorWithdrawn").await;
    assert!(note.contains(&worker), "{note}");
    s.finish(WAIT).await;
    quota_back_to_zero(&s).await;
}

#[tokio::test]
async fn a_job_whose_pods_never_get_ready_on_one_worker_is_placed_again_and_completes_on_another() {
    let _turn = UNSCHEDULABLE.lock().await;
    let s = queued("podsready", 1).await;
    // Only a node of this hostname can run the Job, and at first no
    // worker has one: its Pod stays Pending wherever it is placed. A
    // hostname is the scheduler's to match, not placement's (which judges
    // pools of nodes), so the Job is placed all the same.
    let pool = (HOSTNAME_LABEL, s.ns.clone());
    s.create(
        queued_job(&s, "stuck")
            .node_selector(pool.0, &pool.1)
            .run_for("2s"),
    )
    .await;
    let first = s.assigned_worker("stuck").await.name.clone();
    let other = if first == "worker-1" {
        "worker-2"
    } else {
        "worker-1"
    };
    label_nodes(&s, other, pool.0, Some(&pool.1)).await;
    // Kueue evicts it for PodsReadyTimeout: the mirror is withdrawn and the
    // Job unplaced once its Pod is gone; readmitted, it is placed on the other worker — the first one
    // avoided — where its Pod gets ready and completes.
    let done = s.wait_condition("stuck", "Complete").await;
    let annotations = done.annotations();
    assert_eq!(
        annotations.get(CLUSTER_KEY).map(String::as_str),
        Some(other)
    );
    assert_eq!(
        annotations.get(WITHDRAWN_FROM_ANNOTATION),
        Some(&first),
        "{annotations:?}"
    );
    assert!(
        annotations.contains_key(AVOID_UNTIL_ANNOTATION),
        "{annotations:?}"
    );
    let withdrawn: Vec<String> = s
        .events("stuck")
        .await
        .into_iter()
        .filter(|(reason, _)| reason.starts_with("MirrorWithdraw"))
        .map(|(_, note)| note)
        .collect();
    assert!(
        withdrawn.iter().any(|n| n.contains("PodsReadyTimeout"))
            && withdrawn
                .iter()
                .any(|n| n.contains(&format!("avoiding cluster {first} until"))),
        "{withdrawn:?}"
    );
    s.finish(WAIT).await;
    quota_back_to_zero(&s).await;
    // Each node's hostname label is its name again.
    label_nodes(&s, other, pool.0, None).await;
}

#[tokio::test]
async fn a_queued_job_whose_pods_find_no_node_goes_back_to_kueue_and_runs_where_they_do() {
    let _turn = UNSCHEDULABLE.lock().await;
    let (clusters, relay) = setup().await;
    let manager = kit::client(clusters.manager()).await;
    let set = format!("nonode-{}", std::process::id());
    // worker-1 first, where its Pods will find no node.
    check_of_set(
        &manager,
        &set,
        &["worker-1", "worker-2"],
        SetPlacement::InOrder,
    )
    .await;
    let s = Scenario::new(clusters, relay, "nonode").await;
    kueue_objects::queue(&manager, &s.ns, &s.ns, 2, &set)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let registered: Api<WorkerCluster> = Api::all(manager.clone());
    let timeout = |value: Option<&str>| json!({"spec": {"unschedulableTimeout": value}});
    registered
        .patch(
            "worker-1",
            &PatchParams::default(),
            &Patch::Merge(timeout(Some("3s"))),
        )
        .await
        .expect("shorten worker-1's unschedulableTimeout");
    // Only a node of this hostname can run the Job, and only worker-2 has
    // one: a hostname is the scheduler's to match, not placement's.
    label_nodes(&s, "worker-2", HOSTNAME_LABEL, Some(&s.ns)).await;
    s.create(
        queued_job(&s, "follower")
            .node_selector(HOSTNAME_LABEL, &s.ns)
            .run_for("2s"),
    )
    .await;

    let done = s.wait_condition("follower", "Complete").await;
    let annotations = done.annotations();
    assert_eq!(
        annotations.get(CLUSTER_KEY).map(String::as_str),
        Some("worker-2")
    );
    assert_eq!(
        annotations
            .get(WITHDRAWN_FROM_ANNOTATION)
            .map(String::as_str),
        Some("worker-1"),
        "placed first on worker-1, listed first"
    );
    let notes: Vec<String> = s
        .events("follower")
        .await
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("Pods found no node on cluster worker-1")),
        "why it moved, on the Job: {notes:?}"
    );
    s.finish(WAIT).await;
    quota_back_to_zero(&s).await;
    registered
        .patch(
            "worker-1",
            &PatchParams::default(),
            &Patch::Merge(timeout(None)),
        )
        .await
        .expect("restore worker-1's unschedulableTimeout");
    drop_check_of_set(&manager, &set).await;
    label_nodes(&s, "worker-2", HOSTNAME_LABEL, None).await;
}

/// Sets a label on every node of `worker`; with `None`, removes it — or,
/// for the hostname label, sets it back to the node's name.
async fn label_nodes(s: &Scenario, worker: &str, key: &str, value: Option<&str>) {
    let nodes: Api<Node> = Api::all(kit::client(s.worker(worker)).await);
    let listed = nodes
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing {worker}'s nodes: {e}"));
    for node in listed.items {
        let name = node.name_any();
        let value = value.or((key == HOSTNAME_LABEL).then_some(name.as_str()));
        let patch = json!({"metadata": {"labels": {key: value}}});
        nodes
            .patch(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
            .unwrap_or_else(|e| panic!("labelling node {} of {worker}: {e}", node.name_any()));
    }
}
