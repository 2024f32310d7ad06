//! What a test does with the relay the chart installed: a namespace on
//! every cluster, Jobs created and waited for on the manager, and the last
//! step of each scenario — every Job deleted, the leak audit at zero, and
//! no authorization refusal in jobrelay's container logs.

use std::time::Duration;

use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use crate::scenario::outcome;
use jobrelay_testbed::cluster::ClusterInfo;
use jobrelay_testbed::deploy::{Installed, NAMESPACES, ORIGIN};
use jobrelay_testbed::kit::{self, Clusters};
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
