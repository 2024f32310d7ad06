//! A worker that refuses a Job: a refusal that can clear (a missing namespace,
//! a quota) is waited out; a permanent one (a foreign Job of that name) fails
//! the Job and leaves the foreign Job alone.

use super::*;

#[tokio::test]
async fn a_namespace_missing_on_the_worker_is_waited_for_and_dispatched_once_created() {
    let (clusters, relay) = kit::relay().await;
    let manager = kit::client(clusters.manager()).await;
    let ns = kit::namespace(&manager, "ns-late").await;
    let s = Scenario {
        clusters,
        relay,
        jobs: Api::namespaced(manager, &ns),
        ns,
    };
    let uid = s
        .create(s.job("early").label(CLUSTER_KEY, "worker-1").run_for("2s"))
        .await;
    let waiting = wait_annotation(&s, "early", DISPATCH_WAITING_ANNOTATION, |v| v.is_some())
        .await
        .unwrap_or_default();
    assert!(
        waiting.contains("NAMESPACE_MISSING") && waiting.contains("worker-1"),
        "{waiting}"
    );
    let note = s.wait_event("early", "DispatchWaiting").await;
    assert!(note.contains("tries again in"), "{note}");
    // About a minute of refusals: the agent's backoff has reached its cap
    // (10s in tests) and keeps trying without telling the manager again.
    wait::until("the agent to have retried six times", WAIT * 2, || async {
        let retries = relay
            .agent_log("worker-1")
            .lines()
            .filter(|l| l.contains("apply refused again") && l.contains(&uid))
            .count();
        if retries >= 6 {
            Seen::Ready(())
        } else {
            Seen::Waiting(format!("{retries} retries"))
        }
    })
    .await;
    let dispatch_waiting = s
        .events("early")
        .await
        .into_iter()
        .filter(|(r, _)| r == "DispatchWaiting")
        .count();
    assert_eq!(dispatch_waiting, 1, "one Event per reason, not per retry");

    kit::create_namespace(&kit::client(s.worker("worker-1")).await, &s.ns).await;
    s.wait_condition("early", "Complete").await;
    wait_annotation(&s, "early", DISPATCH_WAITING_ANNOTATION, |v| v.is_none()).await;
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_quota_that_refuses_the_job_is_waited_out_until_it_is_raised() {
    let s = Scenario::relayed("quota").await;
    let worker = s.worker("worker-1");
    let quotas = s.worker_api::<ResourceQuota>(&worker.name).await;
    let quota: ResourceQuota = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "jobs"},
        "spec": {"hard": {"count/jobs.batch": "0"}},
    }))
    .expect("quota");
    quotas
        .create(&PostParams::default(), &quota)
        .await
        .expect("create quota");
    let enforced = |want: &'static str| {
        let quotas = quotas.clone();
        wait::until(
            format!("the quota controller to enforce {want} Jobs"),
            WAIT,
            move || {
                let quotas = quotas.clone();
                async move {
                    match quotas.get("jobs").await {
                        Ok(q) => {
                            let hard = q
                                .status
                                .as_ref()
                                .and_then(|s| s.hard.as_ref())
                                .and_then(|h| h.get("count/jobs.batch"))
                                .map(|v| v.0.clone());
                            if hard.as_deref() == Some(want) {
                                Seen::Ready(())
                            } else {
                                Seen::Waiting(format!("status.hard {hard:?}"))
                            }
                        }
                        Err(e) => Seen::Waiting(e.to_string()),
                    }
                }
            },
        )
    };
    enforced("0").await;

    s.create(s.job("capped").label(CLUSTER_KEY, "worker-1").run_for("2s"))
        .await;
    let waiting = wait_annotation(&s, "capped", DISPATCH_WAITING_ANNOTATION, |v| v.is_some())
        .await
        .unwrap_or_default();
    assert!(
        waiting.contains("QUOTA_EXCEEDED") && waiting.contains("exceeded quota"),
        "{waiting}"
    );

    let raise = serde_json::json!({"spec": {"hard": {"count/jobs.batch": "5"}}});
    quotas
        .patch("jobs", &PatchParams::default(), &Patch::Merge(&raise))
        .await
        .expect("raise quota");
    enforced("5").await;
    s.wait_condition("capped", "Complete").await;
    wait_annotation(&s, "capped", DISPATCH_WAITING_ANNOTATION, |v| v.is_none()).await;
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_foreign_job_of_the_same_name_fails_the_job_and_is_left_untouched() {
    let s = Scenario::relayed("foreign").await;
    let foreign_jobs = s.worker_api::<Job>("worker-1").await;
    let foreign = foreign_jobs
        .create(
            &PostParams::default(),
            &TestJob::new(&s.ns, "same").run_for("1h").build(),
        )
        .await
        .expect("create foreign Job");

    s.create(s.job("same").label(CLUSTER_KEY, "worker-1")).await;
    let failed = s.wait_condition("same", "Failed").await;
    let (reason, message) = failure(&failed);
    assert_eq!(reason, "RemoteRejected");
    assert!(
        message.contains("CONFLICT") && message.contains("left untouched"),
        "{message}"
    );
    assert!(
        failed
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .is_some()
    );
    let note = s.wait_event("same", "RemoteRejected").await;
    assert!(note.contains("the Job fails"), "{note}");
    s.wait_released("same").await;

    s.finish(WAIT).await;
    let after = foreign_jobs
        .get("same")
        .await
        .expect("the foreign Job survives");
    assert_eq!(after.uid(), foreign.uid());
    assert!(
        after.labels().get(ORIGIN_LABEL).is_none(),
        "no jobrelay label was added"
    );
    foreign_jobs
        .delete("same", &DeleteParams::background())
        .await
        .expect("delete the foreign Job");
}
