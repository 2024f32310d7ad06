//! A worker lost under an admitted Job (its link to the manager dropped, its
//! agent and API server alive): the agent fences the mirror after
//! `spec.fenceAfter`, and once the cluster is Lost (`spec.lostAfter`, short
//! here) jobrelay sends the Workload back to Kueue with `Retry`, the quota
//! is released without the worker's word, and the Job is placed on another
//! worker and completes there — never running on both at once. When the
//! link heals, nothing of the old mirror is left on its worker. A Job
//! pinned to the disconnected cluster shows `Retry` with the reason.
//! worker-4 serves only this test.

use super::*;

/// The worker whose agent goes away.
const LOST_WORKER: &str = "worker-4";
/// Its `spec.lostAfter` and `spec.fenceAfter`.
const LOST_AFTER: &str = "20s";
const FENCE_AFTER: &str = "10s";

#[tokio::test]
async fn an_admitted_job_on_a_lost_worker_completes_on_another_and_nothing_of_it_is_left_there() {
    let (clusters, relay) = setup().await;
    let s = Scenario::new(clusters, relay, "lost").await;
    let manager = kit::client(clusters.manager()).await;
    let (set, check) = (format!("set-{}", s.ns), format!("check-{}", s.ns));
    apply_set(&manager, &set, &[LOST_WORKER], SetPlacement::MostRoom).await;
    let prepared = async {
        let parameters =
            json!({"apiGroup": "jobrelay.dev", "kind": "WorkerClusterSet", "name": set});
        kueue_objects::admission_check(&manager, &check, Some(parameters)).await?;
        kueue_objects::queue(&manager, &s.ns, &s.ns, 2, &check).await?;
        anyhow::Ok(())
    };
    prepared.await.unwrap_or_else(|e| panic!("{e:#}"));
    s.set_fencing(LOST_WORKER, Some(LOST_AFTER), Some(FENCE_AFTER))
        .await;

    let uid = s.create(queued_job(&s, "stranded").run_for("20s")).await;
    running_on_a_worker(&s, &uid, "the Job on worker-4").await;
    assert_eq!(s.assigned_worker("stranded").await.name, LOST_WORKER);
    // Its Pod reported ready, Kueue counts the Job's Pods ready: nothing
    // but the loss sends it back.
    pod_ready_on_manager(&s, "stranded").await;
    let link = relay
        .link(LOST_WORKER)
        .expect("agents dial through proxies");
    let sessions = relay.sessions_opened(LOST_WORKER);
    let cut = std::time::Instant::now();
    link.set(Mode::Drop);
    // The operator lets the check use worker-1 too (with worker-4 gone the
    // check is not Active, and Kueue would admit nothing through it).
    apply_set(
        &manager,
        &set,
        &[LOST_WORKER, "worker-1"],
        SetPlacement::MostRoom,
    )
    .await;

    // Pinned to the disconnected cluster: sent back, saying why.
    s.create(
        queued_job(&s, "pinned")
            .label(CLUSTER_KEY, LOST_WORKER)
            .run_for("1s"),
    )
    .await;
    let workloads: Api<Workload> = Api::namespaced(manager.clone(), &s.ns);
    let pinned = workload_of(&s, "pinned").await.name_any();
    let message = check_shows(&workloads, (&pinned, &check), "Retry", |c| {
        c.state == Some(CheckState::Retry)
    })
    .await
    .message;
    assert_eq!(
        message.as_deref(),
        Some(
            "the Job is pinned to cluster worker-4 (label jobrelay.dev/cluster), which is not connected"
        )
    );
    s.jobs
        .delete("pinned", &Default::default())
        .await
        .expect("delete the pinned Job");

    // Fenced after 10 s, Lost after 20 s: the Job goes back to Kueue, is
    // placed on worker-1 and completes there, never beside its old copy.
    let watched = s
        .watch_cut_off("stranded", &uid, LOST_WORKER, cut, Duration::from_secs(180))
        .await;
    watched.assert_fenced_before_lost(&format!("fenceAfter {FENCE_AFTER}, lostAfter {LOST_AFTER}"));
    let done = watched.job;
    let annotations = done.annotations();
    assert_eq!(
        annotations.get(CLUSTER_KEY).map(String::as_str),
        Some("worker-1")
    );
    assert_eq!(
        annotations
            .get(WITHDRAWN_FROM_ANNOTATION)
            .map(String::as_str),
        Some(LOST_WORKER)
    );
    let notes: Vec<String> = s
        .events("stranded")
        .await
        .into_iter()
        .filter(|(reason, _)| reason == "MirrorWithdrawn")
        .map(|(_, note)| note)
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("cluster worker-4 is Lost") && n.contains("when it returns")),
        "{notes:?}"
    );

    // The link heals: the old mirror and its Pods go before anything else
    // happens there.
    link.set(Mode::Pass);
    relay
        .wait_sessions(LOST_WORKER, sessions + 1)
        .await
        .unwrap_or_else(|e| panic!("{LOST_WORKER}'s agent back: {e:#}"));
    let mirrors: Api<Job> = s.worker_api(LOST_WORKER).await;
    let pods: Api<Pod> = s.worker_api(LOST_WORKER).await;
    wait::until(
        "nothing of the old mirror left on worker-4",
        WAIT,
        || async {
            let jobs = mirrors.list(&ListParams::default()).await;
            let pods = pods.list(&ListParams::default()).await;
            match (jobs, pods) {
                (Ok(j), Ok(p)) if j.items.is_empty() && p.items.is_empty() => Seen::Ready(()),
                (Ok(j), Ok(p)) => {
                    Seen::Waiting(format!("{} Jobs, {} Pods", j.items.len(), p.items.len()))
                }
                (j, p) => Seen::Waiting(format!("{:?} {:?}", j.err(), p.err())),
            }
        },
    )
    .await;
    s.set_fencing(LOST_WORKER, None, None).await;
    s.finish(WAIT).await;
    quota_back_to_zero(&s).await;
}
