//! Retention policies on real clusters: a finished Job's mirror kept for its
//! logs and then removed (Pods confirmed gone), a Job's own annotation
//! overriding that, the manager Job deleted after it finished (a Job the
//! worker refused for good included), and a backlog of expired Jobs at start
//! worked off at a pace. This manager records Events for problems only
//! (`--job-events problems`): a Job that runs to completion costs none.

use std::time::Duration;

use jobrelay_e2e::scenario::condition;
use jobrelay_proto::wire::{
    CLUSTER_KEY, MANAGED_BY, REMOTE_CLEANUP_FINALIZER, REMOTE_RETENTION_ANNOTATION,
};
use jobrelay_testbed::kit::{self, Clusters};
use jobrelay_testbed::objects::fixtures::{TestJob, succeeded_status};
use jobrelay_testbed::objects::leaks::assert_no_leaks;
use jobrelay_testbed::relay::{Options, Relay};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::{Timestamp, ToSpan};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use tokio::sync::OnceCell;

const TIMEOUT: Duration = Duration::from_secs(90);
const REMOTE_AFTER_FINISHED: Duration = Duration::from_secs(8);
const MANAGER_AFTER_FINISHED: Duration = Duration::from_secs(15);
const BACKLOG: usize = 120;
const BACKLOG_NAMESPACE: &str = "backlog";

const CONFIG: &str = "
retention:
  remoteAfterFinished: 8s
  managerAfterFinished: 15s
  afterDeactivated: 5s
deletionsPerSecond: 20
";

static RELAY: OnceCell<Relay> = OnceCell::const_new();

/// The clusters, a backlog of long-expired finished Jobs created before the
/// manager started, and the manager with the retention configuration above.
async fn relay() -> (&'static Clusters, &'static Relay) {
    let clusters = kit::clusters(2);
    let relay = RELAY
        .get_or_init(|| async {
            create_backlog(clusters).await;
            let options = Options {
                manager_config: Some(CONFIG.into()),
                manager_args: vec!["--job-events=problems".into()],
                ..Default::default()
            };
            Relay::start_with(clusters.set(), options)
                .await
                .unwrap_or_else(|e| panic!("starting jobrelay: {e:#}"))
        })
        .await;
    (clusters, relay)
}

/// Manager Jobs that finished two hours ago, long past `managerAfterFinished`.
async fn create_backlog(clusters: &Clusters) {
    let client = kit::client(clusters.manager()).await;
    kit::create_namespace(&client, BACKLOG_NAMESPACE).await;
    let jobs: Api<Job> = Api::namespaced(client, BACKLOG_NAMESPACE);
    let started = Timestamp::now() - 3.hours();
    let finished = Timestamp::now() - 2.hours();
    for i in 0..BACKLOG {
        let name = format!("old-{i}");
        let job = TestJob::new(BACKLOG_NAMESPACE, &name)
            .managed_by(MANAGED_BY)
            .build();
        jobs.create(&PostParams::default(), &job)
            .await
            .expect("create backlog Job");
        let status = succeeded_status(started, finished);
        jobs.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("finish backlog Job");
    }
}

/// The test kit's scenario, on the relay with the retention configuration.
struct Scenario(jobrelay_e2e::scenario::Scenario);

impl std::ops::Deref for Scenario {
    type Target = jobrelay_e2e::scenario::Scenario;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Scenario {
    async fn new(prefix: &str) -> Scenario {
        let (clusters, relay) = relay().await;
        Scenario(jobrelay_e2e::scenario::Scenario::new(clusters, relay, prefix).await)
    }

    async fn create(&self, job: TestJob) -> Job {
        self.jobs
            .create(&PostParams::default(), &job.managed_by(MANAGED_BY).build())
            .await
            .expect("create Job")
    }

    /// Polls the manager Job until `check` accepts it.
    async fn wait_job<T>(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(Option<Job>) -> Result<T, String>,
    ) -> T {
        wait::until(format!("Job {name}: {what}"), TIMEOUT, || async {
            match self.jobs.get_opt(name).await {
                Ok(job) => match check(job) {
                    Ok(value) => Seen::Ready(value),
                    Err(seen) => Seen::Waiting(seen),
                },
                Err(e) => Seen::Waiting(e.to_string()),
            }
        })
        .await
    }

    async fn wait_finished(&self, name: &str) -> Timestamp {
        self.wait_job(name, "finished", |job| {
            let job = job.ok_or("gone")?;
            job.status
                .iter()
                .flat_map(|s| s.conditions.iter().flatten())
                .find(|c| c.type_ == "Complete" && c.status == "True")
                .and_then(|c| c.last_transition_time.as_ref().map(|t| t.0))
                .ok_or_else(|| format!("status {:?}", job.status))
        })
        .await
    }

    async fn wait_released(&self, name: &str) {
        self.wait_job(name, "released", |job| match job {
            Some(job)
                if job
                    .finalizers()
                    .iter()
                    .any(|f| f == REMOTE_CLEANUP_FINALIZER) =>
            {
                Err("held".into())
            }
            _ => Ok(()),
        })
        .await
    }

    async fn wait_gone(&self, name: &str) -> Timestamp {
        self.wait_job(name, "deleted", |job| match job {
            None => Ok(Timestamp::now()),
            Some(job) => Err(format!("still there, finalizers {:?}", job.finalizers())),
        })
        .await
    }

    async fn mirror_exists(&self, name: &str) -> bool {
        for worker in self.clusters.workers() {
            let jobs: Api<Job> = Api::namespaced(kit::client(worker).await, &self.ns);
            if jobs.get_opt(name).await.expect("get mirror").is_some() {
                return true;
            }
        }
        false
    }
}

fn seconds_between(from: Timestamp, to: Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64()
}

#[tokio::test]
async fn a_finished_jobs_mirror_stays_for_its_logs_then_both_go_in_turn() {
    let s = Scenario::new("keep").await;
    s.create(TestJob::new(&s.ns, "logs").run_for("1s")).await;
    let finished = s.wait_finished("logs").await;
    assert!(
        s.mirror_exists("logs").await,
        "the mirror is kept after the Job finished"
    );

    s.wait_released("logs").await;
    let released = Timestamp::now();
    assert!(
        !s.mirror_exists("logs").await,
        "the mirror is gone once the Job is released"
    );
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
    let kept = seconds_between(finished, released);
    assert!(
        kept >= REMOTE_AFTER_FINISHED.as_secs_f64() - 1.0,
        "mirror kept {kept:.1}s, retention is 8s"
    );

    let deleted = s.wait_gone("logs").await;
    let lived = seconds_between(finished, deleted);
    assert!(
        lived >= MANAGER_AFTER_FINISHED.as_secs_f64() - 1.0,
        "manager Job deleted {lived:.1}s after it finished, retention is 15s"
    );
}

#[tokio::test]
async fn a_jobs_annotation_keeps_its_mirror_longer() {
    let s = Scenario::new("override").await;
    s.create(TestJob::new(&s.ns, "default").run_for("1s")).await;
    s.create(
        TestJob::new(&s.ns, "longer")
            .run_for("1s")
            .annotate(REMOTE_RETENTION_ANNOTATION, "1h"),
    )
    .await;

    s.wait_finished("longer").await;
    s.wait_released("default").await;
    assert!(
        s.mirror_exists("longer").await,
        "the 1h annotation keeps the mirror after the default ran out"
    );
    let held = s.jobs.get("longer").await.expect("get");
    assert!(
        held.finalizers()
            .iter()
            .any(|f| f == REMOTE_CLEANUP_FINALIZER)
    );

    s.jobs
        .delete("longer", &Default::default())
        .await
        .expect("delete");
    s.wait_gone("longer").await;
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
}

#[tokio::test]
async fn a_job_refused_for_good_fails_and_is_deleted_after_its_retention() {
    let s = Scenario::new("refused").await;
    // A Job of the same name on the worker, not created by jobrelay: the
    // worker refuses the mirror for good.
    let worker = s.clusters.workers().iter().find(|w| w.name == "worker-1");
    let worker = worker.expect("worker-1");
    let foreign: Api<Job> = Api::namespaced(kit::client(worker).await, &s.ns);
    foreign
        .create(
            &PostParams::default(),
            &TestJob::new(&s.ns, "refused").run_for("1h").build(),
        )
        .await
        .expect("create the foreign Job");
    s.create(TestJob::new(&s.ns, "refused").label(CLUSTER_KEY, "worker-1"))
        .await;

    let failed_at = s
        .wait_job("refused", "Failed with reason RemoteRejected", |job| {
            let job = job.ok_or("gone before it was seen failed")?;
            let failed =
                condition(&job, "Failed").ok_or_else(|| format!("status {:?}", job.status))?;
            assert_eq!(failed.reason.as_deref(), Some("RemoteRejected"));
            Ok(failed
                .last_transition_time
                .clone()
                .expect("transition time")
                .0)
        })
        .await;
    // Recorded whatever `--job-events` says.
    let why = s.wait_event("refused", "RemoteRejected").await;
    assert!(why.contains("worker-1"), "names the cluster: {why}");
    s.wait_gone("refused").await;
    assert!(
        seconds_between(failed_at, Timestamp::now()) >= MANAGER_AFTER_FINISHED.as_secs_f64() - 1.0,
        "deleted after managerAfterFinished (15s), as any finished Job"
    );
    assert!(
        foreign.get_opt("refused").await.expect("get").is_some(),
        "the foreign Job is left untouched"
    );
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
    foreign
        .delete("refused", &Default::default())
        .await
        .expect("delete the foreign Job");
}

#[tokio::test]
async fn with_events_for_problems_only_a_job_that_succeeds_records_none_one_that_fails_a_warning() {
    let s = Scenario::new("events").await;
    s.create(TestJob::new(&s.ns, "fine").run_for("1s")).await;
    s.create(TestJob::new(&s.ns, "broken").failing().backoff_limit(0))
        .await;
    let failure = s.wait_event("broken", "RemoteFinished").await;
    assert!(failure.contains("failed"), "tells the failure: {failure}");
    let events: Api<Event> = Api::namespaced(s.jobs.clone().into_client(), &s.ns);
    let listed = events
        .list(&ListParams::default())
        .await
        .expect("list Events");
    let broken: Vec<(String, String)> = listed
        .items
        .iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("broken"))
        .map(|e| {
            let reason = e.reason.clone().unwrap_or_default();
            (reason, e.type_.clone().unwrap_or_default())
        })
        .collect();
    // The failure is one warning; its Pod's failure may have been told
    // before the Job's end was (a PodsFailed warning), never after.
    let finished = broken.iter().filter(|(r, _)| r == "RemoteFinished").count();
    assert_eq!(finished, 1, "a failure is one RemoteFinished: {broken:?}");
    assert!(
        broken
            .iter()
            .all(|(r, t)| t == "Warning" && (r == "RemoteFinished" || r == "PodsFailed")),
        "warnings only, and nothing but the failure: {broken:?}"
    );

    // The mirror kept 8 s, then gone, Pods confirmed: every step a
    // `--job-events steps` manager would have recorded by now.
    s.wait_finished("fine").await;
    s.wait_released("fine").await;
    let steps = s.events("fine").await;
    assert!(
        steps.is_empty(),
        "no Event on a Job that succeeded: {steps:?}"
    );
    assert_no_leaks(s.clusters.set(), &s.relay.origin, &s.ns).await;
}

#[tokio::test]
async fn a_backlog_of_expired_jobs_is_worked_off_at_a_pace() {
    let (clusters, relay) = relay().await;
    let jobs: Api<Job> = Api::namespaced(kit::client(clusters.manager()).await, BACKLOG_NAMESPACE);
    wait::until(
        format!("all {BACKLOG} expired Jobs deleted"),
        TIMEOUT,
        || async {
            match jobs.list(&ListParams::default()).await {
                Ok(list) if list.items.is_empty() => Seen::Ready(()),
                Ok(list) => Seen::Waiting(format!("{} left", list.items.len())),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
    let log = relay.manager_log();
    let progress = log
        .lines()
        .filter(|l| l.contains("retention: manager Jobs deleted so far"))
        .count();
    assert!(
        progress >= 2,
        "the backlog's progress is logged as it goes; {progress} progress lines"
    );
}
