//! The AdmissionCheck itself: `Active` while agents are connected, and what
//! its `parameters` allow.

use super::*;

#[tokio::test]
async fn the_admission_check_is_active_while_agents_are_connected() {
    let (clusters, _) = setup().await;
    let client = kit::client(clusters.manager()).await;
    let message = check_active(&client, CHECK, "True", "Active").await;
    assert!(message.contains("worker-1"), "{message}");
}

#[tokio::test]
async fn parameters_keep_a_checks_workloads_on_its_worker_clusters_and_bad_ones_show() {
    let (clusters, relay) = setup().await;
    let s = Scenario::new(clusters, relay, "pinnedcq").await;
    let client = kit::client(clusters.manager()).await;
    let check = |name: &str, group: &str, kind: &str, target: &str| {
        json!({
            "metadata": {"name": name},
            "spec": {
                "controllerName": jobrelay_proto::wire::MANAGED_BY,
                "parameters": {"apiGroup": group, "kind": kind, "name": target},
            },
        })
    };
    // A WorkerClusterSet of worker-2 alone, in the spirit of MultiKueueConfig.
    let set_name = format!("only-w2-{}", s.ns);
    let sets: Api<WorkerClusterSet> = Api::all(client.clone());
    let set = WorkerClusterSet::new(
        &set_name,
        WorkerClusterSetSpec {
            clusters: vec!["worker-2".into()],
            ..WorkerClusterSetSpec::default()
        },
    );
    sets.patch(
        &set_name,
        &PatchParams::apply("jobrelay-e2e").force(),
        &Patch::Apply(&set),
    )
    .await
    .expect("apply the WorkerClusterSet");
    let only = format!("only-w2-{}", s.ns);
    let single = format!("single-{}", s.ns);
    let unknown = format!("unknown-{}", s.ns);
    let no_set = format!("no-set-{}", s.ns);
    let invalid = format!("invalid-{}", s.ns);
    for (name, body) in [
        (
            &only,
            check(&only, "jobrelay.dev", "WorkerClusterSet", &set_name),
        ),
        (
            &single,
            check(&single, "jobrelay.dev", "WorkerCluster", "worker-1"),
        ),
        (
            &unknown,
            check(&unknown, "jobrelay.dev", "WorkerCluster", "worker-9"),
        ),
        (
            &no_set,
            check(&no_set, "jobrelay.dev", "WorkerClusterSet", "missing"),
        ),
        (
            &invalid,
            check(&invalid, "kueue.x-k8s.io", "MultiKueueConfig", "c"),
        ),
    ] {
        kueue_objects::apply(&client, "AdmissionCheck", None, body)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
    }
    for (name, status, reason) in [
        (&only, "True", "Active"),
        (&single, "True", "Active"),
        (&unknown, "False", "UnknownCluster"),
        (&no_set, "False", "InvalidParameters"),
        (&invalid, "False", "InvalidParameters"),
    ] {
        check_active(&client, name, status, reason).await;
    }
    kueue_objects::queue(&client, &s.ns, &s.ns, 4, &only)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    for i in 0..3 {
        s.create(queued_job(&s, &format!("p{i}")).run_for("1s"))
            .await;
    }
    for i in 0..3 {
        let name = format!("p{i}");
        assert_eq!(s.assigned_worker(&name).await.name, "worker-2", "{name}");
        s.wait_condition(&name, "Complete").await;
    }
    s.finish(WAIT).await;
    let checks: Api<AdmissionCheck> = Api::all(client.clone());
    for name in [&only, &single, &unknown, &no_set, &invalid] {
        let _ = checks.delete(name, &Default::default()).await;
    }
    let _ = sets.delete(&set_name, &Default::default()).await;
}

/// A WorkerClusterSet placed `InOrder` fills its first cluster, spills
/// over to the next, and a Job that fits on neither goes back to Kueue,
/// saying why, until one has room.
#[tokio::test]
async fn a_set_placed_in_order_fills_its_first_cluster_then_spills_over() {
    let (clusters, relay) = setup().await;
    let s = Scenario::new(clusters, relay, "inorder").await;
    let client = kit::client(clusters.manager()).await;
    let name = format!("in-order-{}", s.ns);
    // worker-1 comes first by name, and has as much room as worker-2.
    let clusters = ["worker-2", "worker-1"];
    check_of_set(&client, &name, &clusters, SetPlacement::InOrder).await;
    kueue_objects::queue(&client, &s.ns, &s.ns, 2000, &name)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    // Each asks 600 of a worker's 1,000 CPUs: a worker holds one, not two.
    let big = |job: &str| queued_job(&s, job).cpu("600").run_for("300s");
    s.create(big("first")).await;
    let first = &s.assigned_worker("first").await.name;
    assert_eq!(
        first, "worker-2",
        "the first cluster listed is filled first"
    );
    s.create(big("second")).await;
    let second = &s.assigned_worker("second").await.name;
    assert_eq!(
        second, "worker-1",
        "the next takes what the first has no room for"
    );

    // Room for neither: Kueue is told why, and the quota goes back.
    s.create(big("third")).await;
    let workloads: Api<Workload> = Api::namespaced(client.clone(), &s.ns);
    let third = workload_of(&s, "third").await.name_any();
    let message = check_shows(&workloads, (&third, &name), "Retry", |c| {
        c.state == Some(CheckState::Retry)
    })
    .await
    .message
    .unwrap_or_default();
    for expected in [
        "no worker cluster (WorkerCluster worker-2, worker-1 (filled in that order)) has room",
        "worker-2: room for 0 of 1 Pods; short of cpu",
        "worker-1: room for 0 of 1 Pods; short of cpu",
    ] {
        assert!(message.contains(expected), "{expected:?} in {message:?}");
    }
    let note = s.wait_event("third", "NoRoom").await;
    assert!(note.contains("worker-2: room for 0 of 1 Pods"), "{note}");

    // Room on worker-2 again: Kueue admits the Job once more and it goes
    // there, the first cluster listed.
    s.jobs
        .delete("first", &Default::default())
        .await
        .expect("delete the first Job");
    let third = &s.assigned_worker("third").await.name;
    assert_eq!(third, "worker-2", "placed where room appeared");
    s.finish(WAIT).await;
    drop_check_of_set(&client, &name).await;
}
