//! Two manager replicas electing a leader on a Lease: the leader killed
//! while Jobs dispatch, run and are deleted is replaced within the lease
//! duration and a few seconds, with nothing lost, leaked or dispatched
//! twice, and the leader label the agents' Service selects ends on the new
//! leader's Pod alone; a leader paused past its lease writes nothing once
//! resumed (the manager cluster's audit log is the witness) and steps down.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use jobrelay_e2e::scenario::Scenario;
use jobrelay_proto::wire::{LEADER_LABEL, ORIGIN_UID_LABEL};
use jobrelay_testbed::cluster::audit::writes_after;
use jobrelay_testbed::kit::{self, Clusters};
use jobrelay_testbed::relay::election::lease_holder;
use jobrelay_testbed::relay::{Options, Relay};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

const TIMEOUT: Duration = Duration::from_secs(120);
/// The replicas' `--lease-duration`, short so the tests run quickly.
const LEASE_DURATION: Duration = Duration::from_secs(4);

/// One test at a time kills or pauses a replica.
static EXCLUSIVE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn relay() -> (&'static Clusters, &'static Relay) {
    replica_pods(kit::clusters(2)).await;
    kit::relay_with(2, Options::two_quick_replicas()).await
}

/// Creates the Pods the replicas (`--pod-name manager-<i>`) label while they
/// lead, before they start: Pods that never run (no node matches them), in
/// the Lease's namespace, as Deployment Pods would be.
async fn replica_pods(clusters: &Clusters) {
    let pods: Api<Pod> = Api::namespaced(kit::client(clusters.manager()).await, "default");
    for index in 0..2 {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("manager-{index}")},
            "spec": {
                "nodeSelector": {"test.jobrelay.dev/no-node": "true"},
                "containers": [{"name": "manager", "image": "jobrelay/manager"}],
            },
        }))
        .expect("a Pod");
        match pods.create(&PostParams::default(), &pod).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => panic!("creating Pod manager-{index}: {error}"),
        }
    }
}

/// Waits until the leader label is on replica `index`'s Pod alone, as the
/// agents' Service selects it.
async fn wait_labelled(clusters: &Clusters, index: usize) {
    let pods: Api<Pod> = Api::namespaced(kit::client(clusters.manager()).await, "default");
    let selector = ListParams::default().labels(&format!("{LEADER_LABEL}=true"));
    let expected = vec![format!("manager-{index}")];
    wait::until(
        format!("the leader label on manager-{index} alone"),
        TIMEOUT,
        || async {
            match pods.list(&selector).await {
                Ok(list) => {
                    let labelled: Vec<String> = list.iter().map(ResourceExt::name_any).collect();
                    match labelled == expected {
                        true => Seen::Ready(()),
                        false => Seen::Waiting(format!("labelled: {labelled:?}")),
                    }
                }
                Err(error) => Seen::Waiting(error.to_string()),
            }
        },
    )
    .await
}

async fn holder(clusters: &Clusters) -> Option<usize> {
    lease_holder(&kit::client(clusters.manager()).await).await
}

/// Waits until replica `index` holds the Lease.
async fn wait_leader(clusters: &Clusters, index: usize, within: Duration) {
    wait::until(format!("manager-{index} leads"), within, || async {
        match holder(clusters).await {
            Some(held) if held == index => Seen::Ready(()),
            other => Seen::Waiting(format!("held by {other:?}")),
        }
    })
    .await
}

/// Waits until some replica holds the Lease; returns which.
async fn current_leader(clusters: &Clusters) -> usize {
    wait::until("a leader", TIMEOUT, || async {
        match holder(clusters).await {
            Some(index) => Seen::Ready(index),
            None => Seen::Waiting("no holder".into()),
        }
    })
    .await
}

/// Waits until each of `uids` (by name) is gone from the manager, checking
/// as each goes that nothing of its mirror is left on any worker: its
/// finalizer was released only once the agent confirmed it all gone.
async fn wait_gone_after_their_mirrors(scenario: &Scenario, uids: &BTreeMap<String, String>) {
    let mut left = uids.clone();
    while !left.is_empty() {
        let gone = wait::until("a deleted Job gone", TIMEOUT, || async {
            let mut gone = Vec::new();
            for name in left.keys() {
                if let Ok(None) = scenario.jobs.get_opt(name).await {
                    gone.push(name.clone());
                }
            }
            match gone.is_empty() {
                true => Seen::Waiting(format!("{} left", left.len())),
                false => Seen::Ready(gone),
            }
        })
        .await;
        for name in gone {
            let uid = left.remove(&name).expect("a Job waited for");
            assert_nothing_left(scenario, &name, &uid).await;
        }
    }
}

/// Fails if a mirror or a Pod of manager Job `name` (uid `uid`) exists on a worker.
async fn assert_nothing_left(scenario: &Scenario, name: &str, uid: &str) {
    let mirrors = scenario.mirrors().await.expect("listing mirrors");
    assert!(
        !mirrors.contains_key(uid),
        "{name} is gone from the manager while its mirror is still on {:?}",
        mirrors.get(uid)
    );
    for worker in scenario.clusters.workers() {
        let pods: Api<Pod> = Api::namespaced(kit::client(worker).await, &scenario.ns);
        let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
        let left = pods.list(&selector).await.expect("listing Pods").items;
        assert!(
            left.is_empty(),
            "{name} is gone from the manager while {} of its Pods are on {}",
            left.len(),
            worker.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_killed_while_jobs_dispatch_run_and_are_deleted_is_replaced_without_loss() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (clusters, relay) = relay().await;
    let scenario = Scenario::new(clusters, relay, "ha-kill").await;
    // Mirrors of finished Jobs are removed at once (no retention), so only
    // long ones are counted.
    let long = scenario.create_jobs("long", 3, "300s").await;
    scenario.wait_mirrors(3, TIMEOUT).await;
    let mut deleted = BTreeMap::new();
    for name in long.keys() {
        let job = scenario.jobs.get(name).await.expect("a long Job");
        deleted.insert(name.clone(), job.uid().expect("a uid"));
        scenario
            .jobs
            .delete(name, &DeleteParams::background())
            .await
            .expect("deleting a running Job");
    }

    let mut expected = scenario.create_jobs("run", 6, "3s").await;
    let leader = current_leader(clusters).await;
    let follower = 1 - leader;
    wait_labelled(clusters, leader).await;
    relay.kill_replica(leader);
    let killed = Instant::now();
    // Jobs created while no replica leads are dispatched by the next.
    expected.extend(scenario.create_jobs("late", 5, "2s").await);
    wait_leader(clusters, follower, LEASE_DURATION + Duration::from_secs(5)).await;
    eprintln!(
        "manager-{follower} took over {:?} after the kill",
        killed.elapsed()
    );

    scenario.wait_outcomes(&expected, TIMEOUT).await;
    wait_gone_after_their_mirrors(&scenario, &deleted).await;
    relay
        .start_replica(leader)
        .expect("restarting the killed replica");
    // The killed leader left its mark; restarted, it clears it, and the
    // Service again selects the leader alone.
    wait_labelled(clusters, follower).await;
    scenario.assert_created_at_most(1);
    scenario.finish(TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_paused_past_its_lease_writes_nothing_when_resumed_and_steps_down() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (clusters, relay) = relay().await;
    let scenario = Scenario::new(clusters, relay, "ha-pause").await;
    let began = Timestamp::now();
    let mut expected = scenario.create_jobs("before", 3, "30s").await;
    scenario.wait_mirrors(3, TIMEOUT).await;

    let leader = current_leader(clusters).await;
    let follower = 1 - leader;
    let agent = format!("(manager-{leader})");
    assert!(
        !writes_after(clusters.manager(), &agent, began).is_empty(),
        "the audit log names the leader's writes (else it could witness nothing)"
    );
    let logged_before: Vec<usize> = clusters
        .workers()
        .iter()
        .map(|w| relay.agent_log(&w.name).len())
        .collect();
    relay
        .signal_replica(leader, libc::SIGSTOP)
        .expect("pausing the leader");
    wait_leader(clusters, follower, LEASE_DURATION + Duration::from_secs(5)).await;
    let taken_over = Timestamp::now();
    // The successor works: it dispatches, copies status and cleans up.
    let after = scenario.create_jobs("after", 3, "2s").await;
    for name in after.keys() {
        scenario.assigned_worker(name).await;
    }
    expected.extend(after);

    relay
        .signal_replica(leader, libc::SIGCONT)
        .expect("resuming the old leader");
    let status = relay
        .wait_replica_exited(leader, Duration::from_secs(30))
        .await
        .unwrap_or_else(|e| panic!("manager-{leader} stepped down and ended: {e}"));
    assert!(
        !status.success(),
        "a replica that stepped down ends with an error"
    );
    let log = relay.replica_log(leader);
    assert!(
        log.contains("stepping down"),
        "manager-{leader} says why it stopped; its log ends with: {}",
        log.lines().last().unwrap_or_default()
    );

    scenario.wait_outcomes(&expected, TIMEOUT).await;
    // Taking its own leader label off as it steps down is the one write
    // the old leader may still make: it only unlists it from the Service.
    let own_pod = format!("/pods/manager-{leader}");
    let writes: Vec<String> = writes_after(clusters.manager(), &agent, taken_over)
        .into_iter()
        .filter(|write| {
            let uri = write.split(' ').nth(1).unwrap_or_default();
            !uri.split('?')
                .next()
                .unwrap_or_default()
                .ends_with(&own_pod)
        })
        .collect();
    assert!(
        writes.is_empty(),
        "manager-{leader} wrote after its successor took over: {writes:#?}"
    );
    // No agent took a session from the old leader once the new one had
    // welcomed it: the epochs of its Welcomes never go back.
    for (worker, before) in clusters.workers().iter().zip(logged_before) {
        let log = relay.agent_log(&worker.name);
        let epochs = welcomed_epochs(log.get(before..).unwrap_or_default());
        assert!(
            !epochs.is_empty() && epochs.windows(2).all(|w| w[0] <= w[1]),
            "{}'s Welcomes since the pause, by leader epoch: {epochs:?}",
            worker.name
        );
    }
    relay
        .start_replica(leader)
        .expect("restarting the old leader");
    scenario.assert_created_at_most(1);
    scenario.finish(TIMEOUT).await;
}

/// The leader epochs of the Welcomes an agent's log records, in order.
fn welcomed_epochs(log: &str) -> Vec<i64> {
    log.lines()
        .filter(|line| line.contains("welcomed by the manager"))
        .filter_map(|line| {
            let (_, rest) = line.split_once("leader_epoch=")?;
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .collect()
}
