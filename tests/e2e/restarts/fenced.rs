//! A worker cut off from the manager while a Job runs there — its agent and
//! its API server alive, only the link black-holed: the agent fences (every
//! Pod of the mirror gone before the cluster is Lost), the Job is placed
//! again on the other worker and completes there, and at no look do both
//! workers run a Pod of it. When the link heals, the old mirror is swept.

use super::*;

/// The cut-off worker's `lostAfter` and `fenceAfter` in this scenario.
const LOST_AFTER: &str = "30s";
const FENCE_AFTER: &str = "15s";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_off_worker_fences_before_it_is_lost_and_the_job_never_runs_on_two() {
    let _exclusive = EXCLUSIVE.lock().await;
    let s = setup("fenced").await;
    let relay = s.relay;
    let uid = s.create(s.job("checkpointing").run_for("40s")).await;
    let cut_worker = s.assigned_worker("checkpointing").await.name.clone();
    s.wait_worker_pods(s.worker(&cut_worker), &uid, 1, "Running")
        .await;

    // The agent learns the new fenceAfter from a second Welcome.
    s.set_fencing(&cut_worker, Some(LOST_AFTER), Some(FENCE_AFTER))
        .await;

    let link = relay
        .link(&cut_worker)
        .expect("agents dial through proxies");
    let sessions = relay.sessions_opened(&cut_worker);
    let cut = Instant::now();
    link.set(Mode::BlackHole);
    let watched = s
        .watch_cut_off("checkpointing", &uid, &cut_worker, cut, TIMEOUT * 2)
        .await;
    watched.assert_fenced_before_lost(&format!("fenceAfter {FENCE_AFTER}, lostAfter {LOST_AFTER}"));
    let done_on = watched.job.annotations().get(CLUSTER_KEY).cloned();
    assert!(
        done_on.is_some() && done_on.as_deref() != Some(cut_worker.as_str()),
        "completed elsewhere: {done_on:?}"
    );
    let metrics = relay
        .agent_metrics(&cut_worker)
        .await
        .expect("the agent's metrics");
    let fences = jobrelay_testbed::relay::metric_in(&metrics, "jobrelay_agent_fences_total");
    assert!(fences >= Some(1.0), "the fence is counted: {fences:?}");
    let notes: Vec<String> = worker_events(&s, &cut_worker, "checkpointing").await;
    assert!(
        notes.iter().any(|n| n.contains("fenceAfter")),
        "a Fenced Event on the mirror: {notes:?}"
    );

    link.set(Mode::Pass);
    relay
        .wait_sessions(&cut_worker, sessions + 1)
        .await
        .unwrap();
    s.wait_nothing_of(&cut_worker, &uid).await;
    s.set_fencing(&cut_worker, None, None).await;
    s.finish(TIMEOUT).await;
}

/// The notes of the `Fenced` Events on the mirror `name` on `worker`.
async fn worker_events(s: &Scenario, worker: &str, name: &str) -> Vec<String> {
    let events: Api<k8s_openapi::api::events::v1::Event> = s.worker_api(worker).await;
    events
        .list(&ListParams::default())
        .await
        .map(|list| list.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Fenced"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.note)
        .collect()
}
