//! Jobs created by CronJobs on the manager, with the real CronJob controller:
//! each scheduled Job is mirrored (its owner recorded, not referenced);
//! `concurrencyPolicy: Replace` and history pruning delete manager Jobs, and
//! their mirrors and Pods are then confirmed gone; Jobs deleted within a
//! second of their creation leave nothing on any worker.

use std::time::Duration;

use jobrelay_proto::wire::{
    CLUSTER_KEY, MANAGED_BY, ORIGIN_UID_LABEL, OWNER_ANNOTATION, REMOTE_RETENTION_ANNOTATION,
};
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::objects::leaks::assert_no_leaks;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

/// Long enough for two schedule ticks of a `* * * * *` CronJob.
const CRON_TIMEOUT: Duration = Duration::from_secs(150);
const TIMEOUT: Duration = Duration::from_secs(90);

/// The test kit's scenario, and the CronJobs of its namespace.
struct Scenario {
    base: jobrelay_e2e::scenario::Scenario,
    cronjobs: Api<CronJob>,
}

impl std::ops::Deref for Scenario {
    type Target = jobrelay_e2e::scenario::Scenario;
    fn deref(&self) -> &Self::Target {
        &self.base
    }
}

impl Scenario {
    async fn new(prefix: &str) -> Scenario {
        let base = jobrelay_e2e::scenario::Scenario::relayed(prefix).await;
        let cronjobs = Api::namespaced(base.jobs.clone().into_client(), &base.ns);
        Scenario { base, cronjobs }
    }

    /// A CronJob firing every minute whose Jobs jobrelay mirrors.
    async fn cronjob(&self, name: &str, template: TestJob, spec: serde_json::Value) {
        let job = template.managed_by(MANAGED_BY).build();
        let mut spec_json = serde_json::json!({
            "schedule": "* * * * *",
            "jobTemplate": {"metadata": job.metadata, "spec": job.spec},
        });
        merge(&mut spec_json, spec);
        let cronjob: CronJob = serde_json::from_value(serde_json::json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": spec_json,
        }))
        .expect("CronJob");
        self.cronjobs
            .create(&PostParams::default(), &cronjob)
            .await
            .expect("create CronJob");
    }

    /// Manager Jobs owned by the CronJob, oldest first.
    async fn scheduled(&self, cronjob: &str) -> Result<Vec<Job>, kube::Error> {
        let mut jobs: Vec<Job> = self
            .jobs
            .list(&ListParams::default())
            .await?
            .into_iter()
            .filter(|j| {
                j.owner_references()
                    .iter()
                    .any(|o| o.kind == "CronJob" && o.name == cronjob)
            })
            .collect();
        jobs.sort_by_key(|j| j.metadata.creation_timestamp.clone().map(|t| t.0));
        Ok(jobs)
    }

    async fn wait_scheduled(&self, cronjob: &str, n: usize) -> Vec<Job> {
        wait::until(
            format!("{n} Job(s) created by CronJob {cronjob}"),
            CRON_TIMEOUT,
            || async {
                match self.scheduled(cronjob).await {
                    Ok(jobs) if jobs.len() >= n => Seen::Ready(jobs),
                    Ok(jobs) => Seen::Waiting(format!("{} so far", jobs.len())),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await
    }

    /// Waits for the mirror of `job` on whichever worker it went to.
    async fn wait_mirror(&self, job: &Job) -> Job {
        let name = job.name_any();
        wait::until(format!("mirror of {name}"), TIMEOUT, || async {
            for worker in self.clusters.workers() {
                let jobs: Api<Job> = Api::namespaced(kit::client(worker).await, &self.ns);
                if let Ok(Some(mirror)) = jobs.get_opt(&name).await {
                    return Seen::Ready(mirror);
                }
            }
            Seen::Waiting("on no worker".into())
        })
        .await
    }

    /// Waits until a manager Job is gone, then checks nothing of it is left
    /// on any worker: no Job, no Pod of its origin UID.
    async fn wait_gone_everywhere(&self, job: &Job) {
        let (name, uid) = (job.name_any(), job.uid().expect("uid"));
        wait::until(format!("manager Job {name} gone"), CRON_TIMEOUT, || async {
            match self.jobs.get_opt(&name).await {
                Ok(None) => Seen::Ready(()),
                Ok(Some(job)) => Seen::Waiting(format!("finalizers {:?}", job.finalizers())),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        })
        .await;
        for worker in self.clusters.workers() {
            let client = kit::client(worker).await;
            let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
            let jobs = Api::<Job>::namespaced(client.clone(), &self.ns)
                .list(&selector)
                .await
                .expect("list");
            let pods = Api::<Pod>::namespaced(client, &self.ns)
                .list(&selector)
                .await
                .expect("list");
            assert!(
                jobs.items.is_empty() && pods.items.is_empty(),
                "{name} is gone from the manager but {} still has {} Job(s) and {} Pod(s) of it",
                worker.name,
                jobs.items.len(),
                pods.items.len()
            );
        }
    }

    /// Deletes the CronJob (its Jobs go with it), waits until every manager
    /// Job is gone, and runs the leak check.
    async fn finish(&self, cronjob: &str) {
        self.cronjobs
            .delete(cronjob, &DeleteParams::background())
            .await
            .expect("delete CronJob");
        wait::until("every manager Job gone", TIMEOUT, || async {
            match self.jobs.list(&ListParams::default()).await {
                Ok(list) if list.items.is_empty() => Seen::Ready(()),
                Ok(list) => Seen::Waiting(format!("{} left", list.items.len())),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        })
        .await;
        assert_no_leaks(self.clusters.set(), &self.relay.origin, &self.ns).await;
    }
}

fn merge(base: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(base), serde_json::Value::Object(extra)) = (base.as_object_mut(), extra) {
        base.extend(extra);
    }
}

#[tokio::test]
async fn a_scheduled_job_is_mirrored_with_its_owner_recorded() {
    let s = Scenario::new("cron-mirror").await;
    s.cronjob(
        "nightly",
        TestJob::new(&s.ns, "x").run_for("2s"),
        serde_json::json!({}),
    )
    .await;
    let first = s.wait_scheduled("nightly", 1).await.remove(0);
    let mirror = s.wait_mirror(&first).await;
    assert_eq!(
        mirror
            .annotations()
            .get(OWNER_ANNOTATION)
            .map(String::as_str),
        Some("CronJob/nightly")
    );
    assert!(
        mirror.owner_references().is_empty(),
        "no owner reference crosses clusters"
    );
    wait::until(
        format!("{} Complete on the manager", first.name_any()),
        TIMEOUT,
        || async {
            match s.jobs.get(&first.name_any()).await {
                Ok(job) if job.status.as_ref().and_then(|st| st.succeeded) == Some(1) => {
                    Seen::Ready(())
                }
                Ok(job) => Seen::Waiting(format!("{:?}", job.status)),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    s.finish("nightly").await;
}

#[tokio::test]
async fn replace_deletes_the_running_job_and_its_mirror_and_pods() {
    let s = Scenario::new("cron-replace").await;
    let template = TestJob::new(&s.ns, "x").run_for("1h").terminate_after("2s");
    s.cronjob(
        "replacer",
        template,
        serde_json::json!({"concurrencyPolicy": "Replace"}),
    )
    .await;
    let first = s.wait_scheduled("replacer", 1).await.remove(0);
    s.wait_mirror(&first).await;
    // The next tick replaces the first run: the CronJob controller deletes it.
    s.wait_gone_everywhere(&first).await;
    let runs = s.wait_scheduled("replacer", 1).await;
    assert!(
        runs.iter().all(|j| j.uid() != first.uid()),
        "a new run replaced the first"
    );
    s.wait_mirror(&runs[0]).await;
    s.finish("replacer").await;
}

#[tokio::test]
async fn history_pruning_removes_the_pruned_jobs_mirror() {
    let s = Scenario::new("cron-history").await;
    // Mirrors of finished runs are kept (for logs) until the run itself goes.
    let template = TestJob::new(&s.ns, "x")
        .run_for("1s")
        .annotate(REMOTE_RETENTION_ANNOTATION, "1h");
    s.cronjob(
        "pruned",
        template,
        serde_json::json!({"successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 1}),
    )
    .await;
    let first = s.wait_scheduled("pruned", 1).await.remove(0);
    s.wait_mirror(&first).await;
    // After the second run finishes, the first exceeds the history limit.
    s.wait_gone_everywhere(&first).await;
    s.finish("pruned").await;
}

#[tokio::test]
async fn jobs_deleted_within_a_second_of_creation_leave_nothing_behind() {
    let s = Scenario::new("churn").await;
    for i in 0..20u64 {
        let name = format!("blink-{i}");
        let mut job = TestJob::new(&s.ns, &name)
            .managed_by(MANAGED_BY)
            .run_for("1h");
        if i % 2 == 0 {
            job = job.label(
                CLUSTER_KEY,
                if i % 4 == 0 { "worker-1" } else { "worker-2" },
            );
        }
        s.jobs
            .create(&PostParams::default(), &job.build())
            .await
            .expect("create");
        // Deleted at once, or after up to ~a second: before, during or after dispatch.
        if i % 3 != 0 {
            // The stimulus itself: delete this long after creating.
            tokio::time::sleep(Duration::from_millis(100 * (i % 10))).await;
        }
        s.jobs
            .delete(&name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    wait::until(
        "every churned Job gone from the manager",
        TIMEOUT,
        || async {
            match s.jobs.list(&ListParams::default()).await {
                Ok(list) if list.items.is_empty() => Seen::Ready(()),
                Ok(list) => Seen::Waiting(format!("{} left", list.items.len())),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
}
