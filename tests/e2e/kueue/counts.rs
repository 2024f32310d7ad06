//! Counts that follow the mirror that runs: a Job readmitted after an
//! eviction carries what its first mirror counted, its new mirror runs only
//! what is left, and Kueue's reclaimable Pods match the Pods that run.

use super::*;
use jobrelay_manager::kinds::carried::CARRIED_ANNOTATION;

#[tokio::test]
async fn a_readmitted_job_carries_its_succeeded_pods_and_kueue_reclaims_what_no_longer_runs() {
    let s = queued("counts", 2).await;
    // Three completions, two at a time: the first two succeed together, then
    // the third runs alone — and is evicted while it does.
    let uid = s
        .create(
            queued_job(&s, "resumed")
                .parallelism(2, 3)
                .run_for("15s")
                .terminate_after("1s"),
        )
        .await;
    wait_counts(&s, "two succeeded, the third running", |st| {
        st.succeeded == Some(2) && st.active == Some(1)
    })
    .await;
    let workload = workload_of(&s, "resumed").await.name_any();
    let workloads: Api<Workload> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    set_active(&workloads, &workload, false).await;
    wait::until("the evicted mirror's Pods gone", WAIT, || async {
        match worker_pods_of(&s, &uid).await {
            Ok(0) => Seen::Ready(()),
            Ok(n) => Seen::Waiting(format!("{n} Pods")),
            Err(e) => Seen::Waiting(e),
        }
    })
    .await;
    s.wait_event("resumed", "MirrorWithdrawn").await;
    set_active(&workloads, &workload, true).await;

    // Placed afresh, it carries the two that succeeded: its new mirror runs
    // the one completion left.
    let worker = s.assigned_worker("resumed").await.name.clone();
    let mirrors: Api<Job> = s.worker_api(&worker).await;
    let spec = wait::until("the new mirror", WAIT, || async {
        match mirrors.get_opt("resumed").await {
            Ok(Some(mirror)) => Seen::Ready(mirror.spec.unwrap_or_default()),
            Ok(None) => Seen::Waiting("none yet".into()),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    assert_eq!(
        (spec.completions, spec.parallelism),
        (Some(1), Some(1)),
        "the new mirror runs only what is left"
    );
    let job = s.jobs.get("resumed").await.expect("get");
    assert_eq!(
        job.annotations()
            .get(CARRIED_ANNOTATION)
            .map(String::as_str),
        Some("succeeded=2,failed=0")
    );

    // Until it finishes, no more Pods run than Kueue counts as not
    // reclaimable, and the Job shows the two carried.
    let workloads = kueue_objects::api(&s.jobs.clone().into_client(), "Workload", Some(&s.ns));
    wait::until("the Job complete on its new mirror", WAIT, || async {
        let running = live_worker_pods(&s).await.get(&uid).copied().unwrap_or(0);
        let reclaimable = match workloads.get(&workload).await {
            Ok(w) => w.data["status"]["reclaimablePods"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["count"].as_i64())
                .sum::<i64>(),
            Err(e) => return Seen::Waiting(e.to_string()),
        };
        assert!(
            running as i64 <= 2 - reclaimable,
            "{running} Pods run while Kueue reclaims {reclaimable} of 2"
        );
        let job = match s.jobs.get("resumed").await {
            Ok(job) => job,
            Err(e) => return Seen::Waiting(e.to_string()),
        };
        let succeeded = job.status.as_ref().and_then(|st| st.succeeded);
        assert!(
            succeeded >= Some(2),
            "the carried count never falls: {:?}",
            job.status
        );
        match has_condition(&job, "Complete") {
            true => Seen::Ready(()),
            false => Seen::Waiting(format!("{running} running, {reclaimable} reclaimable")),
        }
    })
    .await;
    let status = s
        .jobs
        .get("resumed")
        .await
        .expect("get")
        .status
        .unwrap_or_default();
    assert_eq!(
        status.succeeded,
        Some(3),
        "two carried and one of the new mirror"
    );
    s.finish(WAIT).await;
    quota_back_to_zero(&s).await;
}

/// Waits until the manager Job `resumed` shows counts that `ready` accepts.
async fn wait_counts(
    s: &Scenario,
    what: &str,
    ready: impl Fn(&k8s_openapi::api::batch::v1::JobStatus) -> bool,
) {
    wait::until(format!("Job resumed: {what}"), WAIT, || async {
        match s.jobs.get("resumed").await {
            Ok(job) => {
                let status = job.status.unwrap_or_default();
                match ready(&status) {
                    true => Seen::Ready(()),
                    false => Seen::Waiting(format!("{status:?}")),
                }
            }
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
}
