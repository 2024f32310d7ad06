//! A namespace taken out of the agent's namespace policy while a mirror
//! runs there, on real clusters. The agent, restarted with the narrower
//! policy, no longer watches that namespace: the apply the manager sends
//! again finds the mirror running and leaves it (the manager Job is not
//! failed while its Pods run), and once the manager Job is deleted the
//! mirror and its Pods are deleted, read from the API server, before the
//! Job's finalizer is released — never "gone" because the caches show
//! nothing there.

use std::collections::BTreeMap;
use std::time::Duration;

use jobrelay_e2e::scenario::{Scenario, has_condition};
use jobrelay_proto::wire::{CLUSTER_KEY, ORIGIN_UID_LABEL};
use jobrelay_testbed::kit;
use jobrelay_testbed::relay::Options;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};

const WORKER: &str = "worker-1";
const TIMEOUT: Duration = Duration::from_secs(120);
/// What the agent logs when it leaves a mirror outside its policy running.
const HELD: &str = "mirror held in a namespace outside the agent's namespace policy";

/// The agent configuration whose policy names `namespaces`.
fn policy(namespaces: &[&str]) -> String {
    format!("namespaces:\n  names: [{}]\n", namespaces.join(", "))
}

/// The Pods of origin UID `uid` on the worker, by phase (Terminating ones
/// included), or why they could not be listed.
async fn pods_of(pods: &Api<Pod>, uid: &str) -> Result<Vec<String>, String> {
    let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
    match pods.list(&selector).await {
        Ok(list) => Ok(list
            .items
            .iter()
            .map(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.clone());
                phase.unwrap_or_default()
            })
            .collect()),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mirror_in_a_namespace_taken_out_of_the_policy_runs_on_and_is_deleted_before_it_is_gone()
{
    // Names unique to this process: the clusters may outlive it.
    let id = std::process::id() % 100_000;
    let (kept, narrowed) = (format!("kept-{id}"), format!("narrowed-{id}"));
    let options = Options {
        agent_configs: BTreeMap::from([(WORKER.to_string(), policy(&[&kept, &narrowed]))]),
        ..Options::default()
    };
    let (clusters, relay) = kit::relay_with(1, options).await;
    for cluster in std::iter::once(clusters.manager()).chain(clusters.workers()) {
        let client = kit::client(cluster).await;
        for namespace in [&kept, &narrowed] {
            kit::create_namespace(&client, namespace).await;
        }
    }
    let scenario = Scenario {
        clusters,
        relay,
        ns: narrowed.clone(),
        jobs: Api::namespaced(kit::client(clusters.manager()).await, &narrowed),
    };
    let uid = scenario
        .create(
            scenario
                .job("held")
                .label(CLUSTER_KEY, WORKER)
                .run_for("600s"),
        )
        .await;
    let pods: Api<Pod> = scenario.worker_api(WORKER).await;
    let jobs: Api<Job> = scenario.worker_api(WORKER).await;
    wait::until("the mirror's Pod running", TIMEOUT, || async {
        match pods_of(&pods, &uid).await {
            Ok(phases) if phases.iter().any(|p| p == "Running") => Seen::Ready(()),
            seen => Seen::Waiting(format!("{seen:?}")),
        }
    })
    .await;

    // The worker's owner takes the namespace out of the policy and
    // restarts the agent; the mirror runs on.
    relay.kill_agent(WORKER);
    let config = clusters
        .set()
        .state_dir
        .join(format!("jobrelay-agent-{WORKER}.yaml"));
    std::fs::write(&config, policy(&[&kept])).unwrap();
    relay.restart_agent(WORKER).await.unwrap();
    wait::until(
        "the re-sent apply answered, the mirror left running",
        TIMEOUT,
        || async {
            match relay.agent_log(WORKER).contains(HELD) {
                true => Seen::Ready(()),
                false => Seen::Waiting(format!("no \"{HELD}\" in the agent's log yet")),
            }
        },
    )
    .await;
    let job = scenario.jobs.get("held").await.unwrap();
    assert!(
        !has_condition(&job, "Failed"),
        "the manager Job failed while its mirror runs: {:?}",
        job.status
    );
    assert!(
        jobs.get_opt("held").await.unwrap().is_some(),
        "the mirror is left as it runs"
    );

    // Deleted, it is released only once the worker shows neither the
    // mirror nor a Pod of it.
    scenario
        .jobs
        .delete("held", &DeleteParams::background())
        .await
        .unwrap();
    scenario.wait_gone("held").await;
    let mirror = jobs
        .get_opt("held")
        .await
        .map(|j| j.is_some())
        .map_err(|e| e.to_string());
    let left = pods_of(&pods, &uid).await;
    assert_eq!(
        (mirror, left),
        (Ok(false), Ok(vec![])),
        "the manager Job was released while the worker still showed (its mirror, its Pods)"
    );
    let log = relay.agent_log(WORKER);
    assert!(
        log.contains("mirror and every Pod gone") && !log.contains("NAMESPACE_NOT_ALLOWED"),
        "the agent's log shows the mirror gone and no refusal"
    );
}
