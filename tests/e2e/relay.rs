//! The relay end to end: one manager cluster, two workers, `jobrelay-manager`
//! and two `jobrelay-agent`s running as their real binaries. Every scenario
//! ends with the leak check over all workers.

use std::time::Duration;

use jobrelay_e2e::cluster::ClusterInfo;
use jobrelay_e2e::fixtures::TestJob;
use jobrelay_e2e::kit::{self, Clusters};
use jobrelay_e2e::leaks::assert_no_leaks;
use jobrelay_e2e::relay::Relay;
use jobrelay_e2e::wait::{self, Seen};
use jobrelay_proto::wire::{
    CLUSTER_KEY, MANAGED_BY, ORIGIN_LABEL, ORIGIN_UID_LABEL, REMOTE_CLEANUP_FINALIZER,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

const TIMEOUT: Duration = Duration::from_secs(90);

/// One scenario's view: its namespace on the manager and on each worker.
struct Scenario {
    clusters: &'static Clusters,
    relay: &'static Relay,
    ns: String,
    jobs: Api<Job>,
}

impl Scenario {
    async fn new(prefix: &str) -> Scenario {
        let (clusters, relay) = kit::relay().await;
        let ns = kit::namespace_everywhere(clusters, prefix).await;
        let jobs = Api::namespaced(kit::client(clusters.manager()).await, &ns);
        Scenario {
            clusters,
            relay,
            ns,
            jobs,
        }
    }

    fn job(&self, name: &str) -> TestJob {
        TestJob::new(&self.ns, name).managed_by(MANAGED_BY)
    }

    async fn create(&self, job: TestJob) -> Job {
        self.jobs
            .create(&PostParams::default(), &job.build())
            .await
            .expect("create manager Job")
    }

    fn worker(&self, name: &str) -> &'static ClusterInfo {
        self.clusters
            .workers()
            .iter()
            .find(|w| w.name == name)
            .unwrap_or_else(|| panic!("no worker {name}"))
    }

    async fn worker_jobs(&self, worker: &ClusterInfo) -> Api<Job> {
        Api::namespaced(kit::client(worker).await, &self.ns)
    }

    async fn worker_pods(&self, worker: &ClusterInfo) -> Api<Pod> {
        Api::namespaced(kit::client(worker).await, &self.ns)
    }

    /// Waits until the manager Job names its cluster, and returns that worker.
    async fn assigned_worker(&self, name: &str) -> &'static ClusterInfo {
        let cluster = wait::until(
            format!("Job {name} assigned to a cluster"),
            TIMEOUT,
            || async {
                match self.jobs.get(name).await {
                    Ok(job) => match job.annotations().get(CLUSTER_KEY) {
                        Some(cluster) => Seen::Ready(cluster.clone()),
                        None => Seen::Waiting(format!("annotations {:?}", job.annotations())),
                    },
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await;
        self.worker(&cluster)
    }

    /// Waits until the mirror's Pods on `worker` are all `phase` (`n` of them).
    async fn wait_worker_pods(
        &self,
        worker: &ClusterInfo,
        uid: &str,
        n: usize,
        phase: &str,
    ) -> Vec<Pod> {
        let pods = self.worker_pods(worker).await;
        let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
        wait::until(
            format!("{n} Pod(s) of mirror {uid} on {} {phase}", worker.name),
            TIMEOUT,
            || {
                let (pods, selector) = (pods.clone(), selector.clone());
                async move {
                    match pods.list(&selector).await {
                        Ok(list)
                            if list.items.len() == n
                                && list.items.iter().all(|p| pod_phase(p) == phase) =>
                        {
                            Seen::Ready(list.items)
                        }
                        Ok(list) => Seen::Waiting(format!(
                            "{:?}",
                            list.items.iter().map(pod_phase).collect::<Vec<_>>()
                        )),
                        Err(e) => Seen::Waiting(e.to_string()),
                    }
                }
            },
        )
        .await
    }

    /// Waits until the manager Job has condition `type_` = True.
    async fn wait_condition(&self, name: &str, type_: &str) -> Job {
        wait::until(format!("manager Job {name} {type_}"), TIMEOUT, || async {
            match self.jobs.get(name).await {
                Ok(job) if has_condition(&job, type_) => Seen::Ready(job),
                Ok(job) => Seen::Waiting(format!("status {:?}", job.status)),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        })
        .await
    }

    /// Waits until the manager Job no longer holds the remote-cleanup finalizer
    /// (or is gone altogether).
    async fn wait_released(&self, name: &str) {
        wait::until(
            format!("manager Job {name} released by jobrelay"),
            TIMEOUT,
            || async {
                match self.jobs.get_opt(name).await {
                    Ok(Some(job))
                        if job
                            .finalizers()
                            .iter()
                            .any(|f| f == REMOTE_CLEANUP_FINALIZER) =>
                    {
                        Seen::Waiting(format!("finalizers {:?}", job.finalizers()))
                    }
                    Ok(_) => Seen::Ready(()),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await
    }

    async fn wait_gone(&self, name: &str) {
        wait::until(format!("manager Job {name} gone"), TIMEOUT, || async {
            match self.jobs.get_opt(name).await {
                Ok(None) => Seen::Ready(()),
                Ok(Some(job)) => Seen::Waiting(format!("finalizers {:?}", job.finalizers())),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        })
        .await
    }

    /// Deletes every manager Job of the scenario, waits until they are gone,
    /// then runs the leak check.
    async fn finish(&self) {
        for job in self
            .jobs
            .list(&ListParams::default())
            .await
            .expect("list Jobs")
        {
            let _ = self
                .jobs
                .delete(&job.name_any(), &DeleteParams::default())
                .await;
            self.wait_gone(&job.name_any()).await;
        }
        assert_no_leaks(self.clusters.set(), &self.relay.origin, &self.ns).await;
    }

    async fn events(&self, name: &str) -> Vec<(String, String)> {
        let events: Api<Event> = Api::namespaced(self.jobs.clone().into_client(), &self.ns);
        let list = events
            .list(&ListParams::default())
            .await
            .expect("list Events");
        list.items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    }

    async fn wait_event(&self, name: &str, reason: &str) -> String {
        wait::until(format!("Event {reason} on Job {name}"), TIMEOUT, || async {
            let events = self.events(name).await;
            match events.iter().find(|(r, _)| r == reason) {
                Some((_, note)) => Seen::Ready(note.clone()),
                None => Seen::Waiting(format!("events {events:?}")),
            }
        })
        .await
    }
}

fn pod_phase(pod: &Pod) -> String {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    if pod.metadata.deletion_timestamp.is_some() {
        format!("{phase}+Terminating")
    } else {
        phase
    }
}

fn has_condition(job: &Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

#[tokio::test]
async fn a_job_runs_on_a_worker_completes_and_leaves_nothing_behind() {
    let s = Scenario::new("complete").await;
    let created = s
        .create(s.job("short").run_for("4s").terminate_after("2s"))
        .await;
    let uid = created.uid().expect("uid");
    let worker = s.assigned_worker("short").await;

    let mirror = s.worker_jobs(worker).await;
    let mirrored = wait::until("mirror Job on its worker", TIMEOUT, || async {
        match mirror.get_opt("short").await {
            Ok(Some(job)) => Seen::Ready(job),
            Ok(None) => Seen::Waiting("not there".into()),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    assert_eq!(mirrored.labels().get(ORIGIN_LABEL), Some(&s.relay.origin));
    assert_eq!(mirrored.labels().get(ORIGIN_UID_LABEL), Some(&uid));
    assert!(
        mirrored.spec.as_ref().unwrap().managed_by.is_none(),
        "the worker's own Job controller runs the mirror"
    );

    let done = s.wait_condition("short", "Complete").await;
    let status = done.status.expect("status");
    assert_eq!(status.succeeded, Some(1));
    assert!(status.start_time.is_some() && status.completion_time.is_some());
    let conditions: Vec<&str> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(
        conditions,
        ["SuccessCriteriaMet", "Complete"],
        "the worker's condition order"
    );

    // Retention is 0s: the mirror goes, and the finalizer only once its Pods are gone.
    s.wait_released("short").await;
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
    let job = s
        .jobs
        .get("short")
        .await
        .expect("a finished manager Job stays");
    assert!(has_condition(&job, "Complete"));
    let reasons: Vec<String> = s
        .events("short")
        .await
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    for reason in [
        "Dispatched",
        "RemoteFinished",
        "RemoteCleanupStarted",
        "RemotePodsGone",
    ] {
        assert!(
            reasons.iter().any(|r| r == reason),
            "Event {reason} recorded, got {reasons:?}"
        );
    }
    s.finish().await;
}

#[tokio::test]
async fn a_failing_job_fails_on_the_manager_with_the_workers_reason() {
    let s = Scenario::new("failing").await;
    s.create(s.job("broken").failing().backoff_limit(1)).await;
    let failed = s.wait_condition("broken", "Failed").await;
    let status = failed.status.expect("status");
    assert_eq!(status.failed, Some(2), "backoffLimit 1: two Pods failed");
    let reason = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Failed")
        .and_then(|c| c.reason.clone());
    assert_eq!(reason.as_deref(), Some("BackoffLimitExceeded"));
    s.wait_released("broken").await;
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
    s.finish().await;
}

#[tokio::test]
async fn deleting_a_running_job_removes_its_pods_before_the_manager_job_goes() {
    let s = Scenario::new("delete").await;
    let created = s
        .create(
            s.job("long")
                .run_for("1h")
                .parallelism(2, 2)
                .terminate_after("4s"),
        )
        .await;
    let uid = created.uid().expect("uid");
    let worker = s.assigned_worker("long").await;
    s.wait_worker_pods(worker, &uid, 2, "Running").await;

    s.jobs
        .delete("long", &DeleteParams::default())
        .await
        .expect("delete manager Job");
    // The Pods are Terminating on the worker while the manager Job still waits for them.
    s.wait_worker_pods(worker, &uid, 2, "Running+Terminating")
        .await;
    let waiting = s
        .jobs
        .get_opt("long")
        .await
        .expect("get")
        .expect("the manager Job outlives its Pods");
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert!(
        waiting
            .finalizers()
            .iter()
            .any(|f| f == REMOTE_CLEANUP_FINALIZER)
    );

    s.wait_gone("long").await;
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
}

#[tokio::test]
async fn suspending_removes_the_mirror_and_resuming_dispatches_it_again() {
    let s = Scenario::new("suspend").await;
    let created = s
        .create(s.job("pausable").run_for("1h").terminate_after("1s"))
        .await;
    let uid = created.uid().expect("uid");
    let worker = s.assigned_worker("pausable").await;
    s.wait_worker_pods(worker, &uid, 1, "Running").await;

    let suspend = |value: bool| Patch::Merge(serde_json::json!({"spec": {"suspend": value}}));
    s.jobs
        .patch("pausable", &PatchParams::default(), &suspend(true))
        .await
        .expect("suspend");
    let mirror = s.worker_jobs(worker).await;
    wait::until("mirror Job removed after suspension", TIMEOUT, || async {
        match mirror.get_opt("pausable").await {
            Ok(None) => Seen::Ready(()),
            Ok(Some(_)) => Seen::Waiting("still there".into()),
            Err(e) => Seen::Waiting(e.to_string()),
        }
    })
    .await;
    s.wait_worker_pods(worker, &uid, 0, "").await;
    let held = s.jobs.get("pausable").await.expect("get");
    assert!(
        held.finalizers()
            .iter()
            .any(|f| f == REMOTE_CLEANUP_FINALIZER),
        "a suspended Job stays held"
    );

    s.jobs
        .patch("pausable", &PatchParams::default(), &suspend(false))
        .await
        .expect("resume");
    s.wait_worker_pods(worker, &uid, 1, "Running").await;
    assert_eq!(
        s.assigned_worker("pausable").await.name,
        worker.name,
        "the cluster is set once, never moved"
    );
    s.finish().await;
}

#[tokio::test]
async fn a_foreign_job_of_the_same_name_is_reported_and_left_untouched() {
    let s = Scenario::new("foreign").await;
    let worker = s.worker("worker-1");
    let foreign_jobs = s.worker_jobs(worker).await;
    let foreign = foreign_jobs
        .create(
            &PostParams::default(),
            &TestJob::new(&s.ns, "same").run_for("1h").build(),
        )
        .await
        .expect("create foreign Job");

    s.create(s.job("same").label(CLUSTER_KEY, "worker-1")).await;
    let note = s.wait_event("same", "ApplyRejected").await;
    assert!(
        note.contains("CONFLICT") && note.contains("left untouched"),
        "{note}"
    );

    s.jobs
        .delete("same", &DeleteParams::default())
        .await
        .expect("delete manager Job");
    s.wait_gone("same").await;
    let after = foreign_jobs
        .get("same")
        .await
        .expect("the foreign Job survives");
    assert_eq!(after.uid(), foreign.uid());
    assert!(
        after.labels().get(ORIGIN_LABEL).is_none(),
        "no jobrelay label was added"
    );
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
    foreign_jobs
        .delete("same", &DeleteParams::background())
        .await
        .expect("clean up the foreign Job");
}

#[tokio::test]
async fn pinned_jobs_go_where_pinned_and_others_spread() {
    let s = Scenario::new("placement").await;
    s.create(s.job("pinned").label(CLUSTER_KEY, "worker-2").run_for("1h"))
        .await;
    assert_eq!(s.assigned_worker("pinned").await.name, "worker-2");

    let mut placed = Vec::new();
    for i in 0..10 {
        let name = format!("spread-{i}");
        s.create(s.job(&name).run_for("1h")).await;
        placed.push(s.assigned_worker(&name).await.name.clone());
    }
    for worker in ["worker-1", "worker-2"] {
        assert!(
            placed.iter().any(|p| p == worker),
            "some unpinned Job went to {worker}: {placed:?}"
        );
    }
    s.finish().await;
}

#[tokio::test]
async fn parallel_jobs_report_the_right_counts() {
    let s = Scenario::new("parallel").await;
    s.create(s.job("wide").parallelism(5, 10).run_for("1s"))
        .await;
    let done = s.wait_condition("wide", "Complete").await;
    let status = done.status.expect("status");
    assert_eq!(status.succeeded, Some(10));
    assert_eq!(status.failed.unwrap_or(0), 0);
    s.wait_released("wide").await;
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
    s.finish().await;
}
