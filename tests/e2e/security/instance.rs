//! A second manager installation of the same origin and CA — a restored
//! backup, a staging copy — run against another cluster: the agent that
//! holds the first one's mirrors is refused a session with it, the refusal
//! shows on that installation's WorkerCluster, and nothing on the worker is
//! deleted.

use std::time::Duration;

use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_proto::wire::CLUSTER_KEY;
use jobrelay_testbed::kit;
use jobrelay_testbed::relay::metric_in;
use jobrelay_testbed::relay::registration::wait_cluster_event;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams};

use super::EXCLUSIVE;

/// The worker whose agent meets the second installation.
const WORKER: &str = "worker-1";
/// The cluster the second installation runs against.
const ELSEWHERE: &str = "worker-2";
const JOBS: usize = 3;
/// Refusals seen before the worker is checked.
const REFUSALS: f64 = 2.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_manager_installation_of_the_same_origin_is_refused_and_deletes_nothing() {
    let _exclusive = EXCLUSIVE.lock().await;
    let s = Scenario::relayed("instance").await;
    let relay = s.relay;
    for index in 0..JOBS {
        s.create(
            s.job(&format!("held-{index}"))
                .label(CLUSTER_KEY, WORKER)
                .run_for("10m"),
        )
        .await;
    }
    s.wait_mirrors(JOBS, WAIT).await;
    let mirrors: Api<Job> = s.worker_api(WORKER).await;

    let started = k8s_openapi::jiff::Timestamp::now();
    let swept = || {
        relay
            .agent_log(WORKER)
            .matches("not desired by the manager")
            .count()
    };
    let swept_before = swept();
    let elsewhere = s.worker(ELSEWHERE);
    let impostor = relay
        .start_impostor(elsewhere, &[WORKER])
        .await
        .expect("a second installation starts");
    // The first installation is down; the agent knows both endpoints.
    relay.kill_manager();
    relay.kill_agent(WORKER);
    relay
        .start_agent_with(WORKER, &["--manager-url", impostor.url()])
        .unwrap();

    let refused = "jobrelay_sessions_refused_total{reason=\"manager_instance_refused\"}";
    wait::until(
        "the second installation refusing the agent twice",
        WAIT,
        || async {
            match impostor
                .metrics()
                .await
                .map(|text| metric_in(&text, refused))
            {
                Ok(Some(n)) if n >= REFUSALS => Seen::Ready(()),
                seen => Seen::Waiting(format!("{seen:?}")),
            }
        },
    )
    .await;
    let client = kit::client(elsewhere).await;
    let note = wait_cluster_event(client, WORKER, "ManagerInstanceRefused", started).await;
    println!("refusal: {note}");
    assert!(
        note.contains("--adopt-manager-instance="),
        "the Event says how to adopt the installation: {note}"
    );
    let held = mirrors.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(held.len(), JOBS, "every mirror is still on the worker");
    assert!(
        held.iter().all(|m| m.metadata.deletion_timestamp.is_none()),
        "no mirror is being deleted"
    );
    assert_eq!(swept(), swept_before, "the agent swept nothing");

    drop(impostor);
    relay.kill_agent(WORKER);
    relay.start_manager().unwrap();
    relay.restart_agent(WORKER).await.unwrap();
    s.finish(Duration::from_secs(120)).await;
}
