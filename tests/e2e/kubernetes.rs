//! Proof that the test clusters behave like Kubernetes in the ways jobrelay
//! depends on: the Job controller runs Pods to completion, deleting a Job
//! without a propagation policy orphans its Pods, the real garbage collector
//! cascades a Background delete (through a visible Terminating phase),
//! `spec.managedBy` keeps the built-in Job controller away, and CronJobs fire
//! — all on the manager cluster; and that the real scheduler fits Pods into
//! Nodes of finite room (`room.rs`, on worker-1).

use std::time::Duration;

use jobrelay_testbed::kit::{self, clusters};
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams, PropagationPolicy};

#[path = "kubernetes/room.rs"]
mod room;

const TIMEOUT: Duration = Duration::from_secs(60);
/// One worker, for the finite-room tests: cordoning its default Node
/// leaves the manager's alone for the other tests of this process.
const WORKERS: usize = 1;

async fn setup(prefix: &str) -> (Api<Job>, Api<Pod>, String) {
    let client = kit::client(clusters(WORKERS).manager()).await;
    let ns = kit::namespace(&client, prefix).await;
    (
        Api::namespaced(client.clone(), &ns),
        Api::namespaced(client, &ns),
        ns,
    )
}

async fn create(jobs: &Api<Job>, job: TestJob) -> Job {
    jobs.create(&PostParams::default(), &job.build())
        .await
        .expect("create Job")
}

/// Pods created by the Job controller for `job` (`job-name` label).
async fn pods_of(pods: &Api<Pod>, job: &str) -> Result<Vec<Pod>, kube::Error> {
    Ok(pods
        .list(&ListParams::default().labels(&format!("job-name={job}")))
        .await?
        .items)
}

fn phases(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .map(|p| {
            let phase = p
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            if p.metadata.deletion_timestamp.is_some() {
                format!("{phase}+Terminating")
            } else {
                phase
            }
        })
        .collect()
}

/// Waits until `job` has exactly `n` Pods, all in `phase`, and returns them.
async fn wait_pods_in_phase(pods: &Api<Pod>, job: &str, n: usize, phase: &str) -> Vec<Pod> {
    wait::until(
        format!("{n} Pod(s) of Job {job} {phase}"),
        TIMEOUT,
        || async move {
            match pods_of(pods, job).await {
                Ok(list) if list.len() == n && phases(&list).iter().all(|p| p == phase) => {
                    Seen::Ready(list)
                }
                Ok(list) => Seen::Waiting(format!("phases {:?}", phases(&list))),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await
}

fn condition(job: &Job, type_: &str) -> Option<String> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

async fn wait_job_gone(jobs: &Api<Job>, name: &str) {
    wait::until(format!("Job {name} gone"), TIMEOUT, || async move {
        match jobs.get_opt(name).await {
            Ok(None) => Seen::Ready(()),
            Ok(Some(job)) => Seen::Waiting(format!(
                "still there, finalizers {:?}",
                job.metadata.finalizers
            )),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await
}

#[tokio::test]
async fn job_runs_to_completion() {
    let (jobs, pods, ns) = setup("complete").await;
    create(&jobs, TestJob::new(&ns, "short").run_for("2s")).await;

    wait_pods_in_phase(&pods, "short", 1, "Running").await;
    wait_pods_in_phase(&pods, "short", 1, "Succeeded").await;
    let job = wait::until("Job short Complete", TIMEOUT, || async {
        match jobs.get("short").await {
            Ok(job) if condition(&job, "Complete").as_deref() == Some("True") => Seen::Ready(job),
            Ok(job) => Seen::Waiting(format!("status {:?}", job.status)),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    let status = job.status.expect("status");
    assert_eq!(status.succeeded, Some(1));
    assert!(
        status.completion_time.is_some(),
        "a Complete Job has a completion time"
    );
}

#[tokio::test]
async fn failing_pod_fails_the_job() {
    let (jobs, pods, ns) = setup("fail").await;
    create(&jobs, TestJob::new(&ns, "broken").failing()).await;

    wait_pods_in_phase(&pods, "broken", 1, "Failed").await;
    wait::until("Job broken Failed", TIMEOUT, || async {
        match jobs.get("broken").await {
            Ok(job) if condition(&job, "Failed").as_deref() == Some("True") => Seen::Ready(()),
            Ok(job) => Seen::Waiting(format!("status {:?}", job.status)),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
}

/// The leak jobrelay exists to prevent: batch/v1 Jobs default to Orphan.
#[tokio::test]
async fn delete_without_propagation_policy_orphans_pods() {
    let (jobs, pods, ns) = setup("orphan").await;
    create(&jobs, TestJob::new(&ns, "long").run_for("1h")).await;
    let running = wait_pods_in_phase(&pods, "long", 1, "Running").await;

    jobs.delete("long", &DeleteParams::default())
        .await
        .expect("delete Job");
    // The Job is removed only after the garbage collector has orphaned its
    // dependents (the `orphan` finalizer), so from here on the outcome is final.
    wait_job_gone(&jobs, "long").await;

    let pod = pods
        .get(running[0].metadata.name.as_deref().expect("pod name"))
        .await
        .expect("the Pod survives its Job");
    assert_eq!(pod.status.and_then(|s| s.phase).as_deref(), Some("Running"));
    assert!(
        pod.metadata.deletion_timestamp.is_none(),
        "nothing deletes an orphaned Pod"
    );
    assert!(
        pod.metadata.owner_references.unwrap_or_default().is_empty(),
        "the garbage collector removed the owner reference"
    );
}

#[tokio::test]
async fn background_delete_removes_pods_through_terminating() {
    let (jobs, pods, ns) = setup("background").await;
    create(
        &jobs,
        TestJob::new(&ns, "long")
            .run_for("1h")
            .parallelism(2, 2)
            .terminate_after("3s"),
    )
    .await;
    wait_pods_in_phase(&pods, "long", 2, "Running").await;

    jobs.delete(
        "long",
        &DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        },
    )
    .await
    .expect("delete Job");
    wait_job_gone(&jobs, "long").await;
    wait_pods_in_phase(&pods, "long", 2, "Running+Terminating").await;
    wait::until("every Pod of Job long gone", TIMEOUT, || async {
        match pods_of(&pods, "long").await {
            Ok(list) if list.is_empty() => Seen::Ready(()),
            Ok(list) => Seen::Waiting(format!("phases {:?}", phases(&list))),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
}

#[tokio::test]
async fn managed_by_keeps_the_job_controller_away() {
    let (jobs, pods, ns) = setup("managed").await;
    create(
        &jobs,
        TestJob::new(&ns, "relayed").managed_by("jobrelay.dev/manager"),
    )
    .await;
    // A Job created afterwards gets its Pod: the Job controller has had its turn.
    create(&jobs, TestJob::new(&ns, "control").run_for("1h")).await;
    wait_pods_in_phase(&pods, "control", 1, "Running").await;

    assert!(
        pods_of(&pods, "relayed").await.expect("list").is_empty(),
        "no Pods for a Job managed by jobrelay"
    );
    let relayed = jobs.get("relayed").await.expect("get Job");
    assert_eq!(
        relayed.status.and_then(|s| s.active).unwrap_or(0),
        0,
        "no status from the Job controller"
    );
}

#[tokio::test]
async fn cronjob_creates_jobs_on_schedule() {
    let (jobs, _, ns) = setup("cron").await;
    let client = kit::client(clusters(WORKERS).manager()).await;
    let cronjobs: Api<CronJob> = Api::namespaced(client, &ns);
    let template = TestJob::new(&ns, "unused").build();
    let cronjob: CronJob = serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "every-minute", "namespace": ns},
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": {"spec": template.spec},
        },
    }))
    .expect("CronJob");
    cronjobs
        .create(&PostParams::default(), &cronjob)
        .await
        .expect("create CronJob");

    let job = wait::until(
        "a Job created by CronJob every-minute",
        Duration::from_secs(150),
        || async {
            match jobs.list(&ListParams::default()).await {
                Ok(list) => match list.items.into_iter().find(|j| {
                    j.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.kind == "CronJob" && o.name == "every-minute")
                }) {
                    Some(job) => Seen::Ready(job),
                    None => Seen::Waiting("no Job owned by the CronJob".into()),
                },
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    assert!(
        job.metadata
            .name
            .unwrap_or_default()
            .starts_with("every-minute-")
    );
}
