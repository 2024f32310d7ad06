//! What a test does with the relay the chart installed: a namespace on
//! every cluster, Jobs created and waited for on the manager, and the last
//! step of each scenario — every Job deleted, the leak audit at zero, and
//! no authorization refusal in jobrelay's container logs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_proto::wire::MANAGED_BY;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use crate::scenario::outcome;
use jobrelay_testbed::cluster::ClusterInfo;
use jobrelay_testbed::deploy::{Installed, NAMESPACES, ORIGIN};
use jobrelay_testbed::kit::{self, Clusters};
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::objects::leaks::assert_no_leaks;
use jobrelay_testbed::wait::{self, Seen};

/// How long a step of a deploy scenario may take.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// Waits until every worker's agent holds a session with the manager.
pub async fn wait_connected(clusters: &Clusters) {
    let api: Api<WorkerCluster> = Api::all(kit::client(clusters.manager()).await);
    for worker in clusters.workers() {
        wait::until(format!("{} connected", worker.name), TIMEOUT, || async {
            match api.get(&worker.name).await {
                Ok(cluster) => match cluster.condition("Connected").map(|c| c.status.as_str()) {
                    Some("True") => Seen::Ready(()),
                    other => Seen::Waiting(format!("Connected {other:?}")),
                },
                Err(error) => Seen::Waiting(error.to_string()),
            }
        })
        .await;
    }
}

/// The scenario namespace `name` (one of [`NAMESPACES`]) and the manager's
/// Jobs there.
pub async fn namespace(installed: &Installed, name: &str) -> (String, Api<Job>) {
    assert!(
        NAMESPACES.contains(&name),
        "{name} is not among {NAMESPACES:?}"
    );
    let jobs = Api::namespaced(kit::client(installed.clusters.manager()).await, name);
    (name.to_string(), jobs)
}

/// Creates `job` (relayed: managed by jobrelay) and returns its UID.
pub async fn create(jobs: &Api<Job>, job: Job) -> String {
    let created = jobs
        .create(&PostParams::default(), &job)
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", job.name_any()));
    created.uid().expect("a uid")
}

/// Waits until the manager Job `name` has finished as `expected`.
pub async fn wait_outcome(jobs: &Api<Job>, name: &str, expected: &str) -> Job {
    wait::until(format!("{name} {expected}"), TIMEOUT, || async {
        match jobs.get(name).await {
            Ok(job) if outcome(&job) == Some(expected) => Seen::Ready(job),
            Ok(job) => Seen::Waiting(format!("{:?}", job.status)),
            Err(error) => Seen::Waiting(error.to_string()),
        }
    })
    .await
}

/// Deletes every manager Job of `ns`, waits until they are gone (released
/// only once their worker Pods are), and audits the workers for leaks and
/// the jobrelay containers' logs for refusals.
pub async fn finish(installed: &Installed, ns: &str, jobs: &Api<Job>) {
    for job in jobs
        .list(&ListParams::default())
        .await
        .expect("listing Jobs")
    {
        let _ = jobs
            .delete(&job.name_any(), &DeleteParams::background())
            .await;
    }
    wait::until("every manager Job gone", TIMEOUT, || async {
        match jobs.list(&ListParams::default()).await {
            Ok(list) if list.items.is_empty() => Seen::Ready(()),
            Ok(list) => Seen::Waiting(format!("{} left", list.items.len())),
            Err(error) => Seen::Waiting(error.to_string()),
        }
    })
    .await;
    assert_no_leaks(installed.clusters.set(), ORIGIN, ns).await;
    let forbidden = installed.forbidden_lines();
    assert!(
        forbidden.is_empty(),
        "a jobrelay container was refused by its API server:\n  {}",
        forbidden.join("\n  ")
    );
}

/// The worker cluster named `name`.
pub fn worker<'a>(installed: &'a Installed, name: &str) -> &'a ClusterInfo {
    installed
        .clusters
        .workers()
        .iter()
        .find(|w| w.name == name)
        .expect("a worker of that name")
}

/// Creates a short relayed Job (`during-<n>`) every second until `flowing`
/// turns false; returns their names.
pub async fn keep_creating(jobs: Api<Job>, ns: String, flowing: Arc<AtomicBool>) -> Vec<String> {
    let mut names = Vec::new();
    let mut every_second = tokio::time::interval(Duration::from_secs(1));
    // Bounded: the steps of a scenario fail long before this many seconds.
    for index in 0..600 {
        every_second.tick().await;
        if !flowing.load(Ordering::SeqCst) {
            break;
        }
        let name = format!("during-{index}");
        let job = TestJob::new(&ns, &name)
            .managed_by(MANAGED_BY)
            .run_for("3s")
            .build();
        create(&jobs, job).await;
        names.push(name);
    }
    names
}

/// Asserts, from the manager's Events, that each of `names` was dispatched
/// once and released only after its worker reported its Pods gone.
pub async fn dispatched_once_and_released_after_their_pods(
    installed: &Installed,
    ns: &str,
    names: &[String],
) {
    let reasons = event_counts(installed, ns).await;
    for name in names {
        let seen = reasons.get(name.as_str()).cloned().unwrap_or_default();
        assert_eq!(
            seen.get("Dispatched"),
            Some(&1),
            "{name} dispatched once: {seen:?}"
        );
        assert!(
            seen.contains_key("RemotePodsGone"),
            "{name} released after its worker reported its Pods gone: {seen:?}"
        );
    }
}

/// How often each reason was recorded on each Job of `ns` (an Event's
/// series counts its repeats).
async fn event_counts(installed: &Installed, ns: &str) -> BTreeMap<String, BTreeMap<String, i32>> {
    let events: Api<Event> = Api::namespaced(kit::client(installed.clusters.manager()).await, ns);
    let mut counts: BTreeMap<String, BTreeMap<String, i32>> = BTreeMap::new();
    for event in events
        .list(&ListParams::default())
        .await
        .expect("listing Events")
    {
        let Some(name) = event.regarding.as_ref().and_then(|r| r.name.clone()) else {
            continue;
        };
        let times = event.series.as_ref().map_or(1, |s| s.count);
        *counts
            .entry(name)
            .or_default()
            .entry(event.reason.unwrap_or_default())
            .or_default() += times;
    }
    counts
}
