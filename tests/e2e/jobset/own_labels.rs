//! A JobSet whose templates carry jobrelay's own labels — another manager
//! installation's instance, another Job's origin UID — as a user may write
//! them: none reaches the worker, where the JobSet controller would copy
//! them onto the child Jobs and Pods, and the agent, restarted while they
//! run, still takes its manager.

use jobrelay_proto::wire::{MANAGER_INSTANCE_LABEL, ORIGIN_UID_LABEL};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::{JOBSET_WORKER, create, finish, leader_and_workers, on_worker, relayed, wait_manager};
use jobrelay_testbed::wait::{self, Seen, WAIT};

/// Labels a user wrote in jobrelay's prefix.
const FORGED: [(&str, &str); 2] = [
    (MANAGER_INSTANCE_LABEL, "another-installation"),
    (ORIGIN_UID_LABEL, "another-jobs-uid"),
];

#[tokio::test]
async fn jobrelays_own_labels_on_a_jobsets_templates_never_reach_the_worker() {
    let (s, jobsets) = relayed("jobset-own-labels").await;
    let mut jobset = leader_and_workers("forged", "20s");
    for job in &mut jobset.spec.as_mut().expect("spec").replicated_jobs {
        let job_meta = job.template.metadata.get_or_insert_with(Default::default);
        let pod_meta = job
            .template
            .spec
            .as_mut()
            .expect("a Job spec")
            .template
            .metadata
            .get_or_insert_with(Default::default);
        for meta in [job_meta, pod_meta] {
            let labels = meta.labels.get_or_insert_with(Default::default);
            labels.extend(FORGED.map(|(k, v)| (k.to_string(), v.to_string())));
        }
    }
    let uid = create(&jobsets, &jobset).await;
    let (jobs, pods) = wait::until("2 Jobs and 4 Pods of the mirror", WAIT, || async {
        let jobs: Vec<Job> = on_worker(&s, "forged").await;
        let pods: Vec<Pod> = on_worker(&s, "forged").await;
        match (jobs.len(), pods.len()) {
            (2, 4) => Seen::Ready((jobs, pods)),
            (j, p) => Seen::Waiting(format!("{j} Jobs, {p} Pods")),
        }
    })
    .await;
    for (what, labels) in jobs
        .iter()
        .map(|j| (j.name_any(), j.labels()))
        .chain(pods.iter().map(|p| (p.name_any(), p.labels())))
    {
        assert_eq!(labels.get(ORIGIN_UID_LABEL), Some(&uid), "{what}");
        assert_eq!(labels.get(MANAGER_INSTANCE_LABEL), None, "{what}");
    }

    // The agent restarted reads the instance from the mirrors it wrote,
    // and takes its manager again.
    s.relay.kill_agent(JOBSET_WORKER);
    s.relay
        .restart_agent(JOBSET_WORKER)
        .await
        .unwrap_or_else(|e| panic!("the agent of {JOBSET_WORKER} back in session: {e:#}"));
    wait_manager(&jobsets, ("forged", "Completed"), |set| {
        set.condition("Completed")
    })
    .await;
    let refused = "refusing manager instance";
    assert!(
        !s.relay.agent_log(JOBSET_WORKER).contains(refused),
        "the agent refused its manager"
    );
    finish(&s, &jobsets).await;
}
