//! A queued Job's plain way through Kueue: run within its quota, finish, and
//! leave nothing behind — or fail when a worker refuses it for good; a Job
//! with no queue is dispatched beside Kueue.

use super::*;

#[tokio::test]
async fn quota_for_two_runs_five_jobs_never_more_than_two_at_once() {
    let s = queued("quota", 2).await;
    for i in 0..5 {
        s.create(queued_job(&s, &format!("q{i}")).run_for("3s"))
            .await;
    }
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    let first = workload_of(&s, "q0").await.name_any();
    check_shows(&workloads, (&first, CHECK), "Ready", |c| {
        c.state == Some(CheckState::Ready)
    })
    .await;
    let most = std::cell::Cell::new(0);
    wait::until(
        "all 5 queued Jobs Complete, at most 2 running at once",
        Duration::from_secs(180),
        || async {
            let live = live_worker_pods(&s).await;
            let running: usize = live.values().sum();
            assert!(
                running <= 2,
                "quota is 2 CPUs, {running} Pods run on workers: {live:?}"
            );
            most.set(most.get().max(running));
            let complete = s.complete().await;
            match complete {
                5 => Seen::Ready(()),
                n => Seen::Waiting(format!("{n} of 5 Complete, {running} running")),
            }
        },
    )
    .await;
    assert!(most.get() >= 1, "the Jobs ran on the workers");
    // Each mirror was created suspended and resumed once Kueue admitted its Job.
    let job = s.jobs.get("q0").await.expect("q0");
    let conditions = job.status.and_then(|st| st.conditions).unwrap_or_default();
    let suspended = conditions.iter().find(|c| c.type_ == "Suspended");
    assert_eq!(
        suspended.map(|c| (c.status.as_str(), c.reason.as_deref())),
        Some(("False", Some("JobResumed"))),
        "the mirror started suspended: {conditions:?}"
    );
    s.finish(WAIT).await;
}

#[tokio::test]
async fn a_job_without_a_queue_name_is_dispatched_directly_beside_kueue() {
    let (clusters, relay) = setup().await;
    let s = Scenario::new(clusters, relay, "unqueued").await;
    s.create(s.job("direct").run_for("2s")).await;
    s.wait_condition("direct", "Complete").await;
    s.finish(WAIT).await;
}

#[tokio::test]
async fn kueue_deleting_a_finished_workload_leaves_nothing_that_blocks_the_namespace() {
    let s = queued("retained", 1).await;
    s.create(queued_job(&s, "done").run_for("1s")).await;
    let workload = workload_of(&s, "done").await.name_any();
    s.wait_condition("done", "Complete").await;
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    wait::until(
        "Kueue deleting the finished Workload (afterFinished 5s)",
        WAIT,
        || async {
            match workloads.get_opt(&workload).await {
                Ok(None) => Seen::Ready(()),
                Ok(Some(w)) => {
                    Seen::Waiting(format!("still there, finalizers {:?}", w.finalizers()))
                }
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    s.wait_released("done").await;
    // The namespace goes with everything in it: no finalizer of jobrelay's holds it.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
        Api::all(s.jobs.clone().into_client());
    namespaces
        .delete(&s.ns, &Default::default())
        .await
        .expect("delete the namespace");
    wait::until(
        format!("namespace {} gone from the manager", s.ns),
        WAIT,
        || async {
            match namespaces.get_opt(&s.ns).await {
                Ok(None) => Seen::Ready(()),
                Ok(Some(ns)) => Seen::Waiting(format!("{:?}", ns.status)),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    jobrelay_testbed::objects::leaks::assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns)
        .await;
}

#[tokio::test]
async fn a_queued_job_a_worker_refuses_for_good_fails_and_its_workload_finishes() {
    let s = queued("refused", 1).await;
    // A Job of the same name that jobrelay did not create waits on worker-1.
    let foreign_jobs: Api<Job> = s.worker_api("worker-1").await;
    let foreign = jobrelay_testbed::objects::fixtures::TestJob::new(&s.ns, "clash").run_for("1h");
    foreign_jobs
        .create(&Default::default(), &foreign.build())
        .await
        .expect("create the foreign Job");
    s.create(queued_job(&s, "clash").label(jobrelay_proto::wire::CLUSTER_KEY, "worker-1"))
        .await;
    let failed = s.wait_condition("clash", "Failed").await;
    let spec = failed.spec.as_ref().expect("spec");
    assert_eq!(spec.suspend, Some(true), "never admitted: still suspended");
    let status = failed.status.as_ref().expect("status");
    assert!(
        status.start_time.is_some(),
        "a finished Job has a start time"
    );
    let workload = workload_of(&s, "clash").await.name_any();
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    wait::until(
        "Kueue finishing the refused Job's Workload",
        WAIT,
        || async {
            match workloads.get_opt(&workload).await {
                Ok(Some(w)) if w.has("Finished") => Seen::Ready(()),
                Ok(None) => Seen::Ready(()),
                Ok(Some(w)) => Seen::Waiting(format!("{:?}", w.status.map(|st| st.conditions))),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    s.finish(WAIT).await;
    foreign_jobs
        .delete("clash", &kube::api::DeleteParams::background())
        .await
        .expect("delete the foreign Job");
}
