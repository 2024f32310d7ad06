//! The agent's orphan sweep: what its manager no longer wants is deleted,
//! only of its own origin, and a backlog of hundreds — more than the brake
//! on mass deletion lets go at once — held, shown, and after the brake's
//! confirmation swept at a steady pace with its progress in the log; and a
//! mirror the manager forgot behind its back, while the agent's session
//! stays open, swept within a few heartbeats (anti-entropy). These tests
//! restart or watch the agent's session, so they run one at a time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use jobrelay_e2e::scenario::Scenario;
use jobrelay_proto::wire::{CLUSTER_KEY, ORIGIN_LABEL, ORIGIN_UID_LABEL};
use jobrelay_testbed::kit;
use jobrelay_testbed::relay::Options;
use jobrelay_testbed::relay::registration::wait_cluster_event;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

const TIMEOUT: Duration = Duration::from_secs(120);
const WORKER_A: &str = "worker-1";

/// Only one test at a time restarts the agent.
static EXCLUSIVE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long the brake holds here (5 minutes by default).
const BRAKE_CONFIRM: &str = "15s";

async fn setup(prefix: &str) -> Scenario {
    let options = Options {
        agent_args: vec!["--deletion-brake-confirm".into(), BRAKE_CONFIRM.into()],
        ..Options::default()
    };
    let (clusters, relay) = kit::relay_with(2, options).await;
    Scenario::new(clusters, relay, prefix).await
}

/// Waits until no Pod matches `selector`.
async fn wait_no_pods(pods: &Api<Pod>, selector: &ListParams, what: &str) {
    wait::until(what, TIMEOUT, || async {
        match pods.list(selector).await {
            Ok(list) if list.items.is_empty() => Seen::Ready(()),
            other => Seen::Waiting(format!("{:?} Pods", other.map(|l| l.items.len()))),
        }
    })
    .await
}

/// Job `name` running on worker-1 until deleted, once its mirror has a
/// Pod there: the selector of its mirror's objects.
async fn long_running_on_a(scenario: &Scenario, pods: &Api<Pod>, name: &str) -> ListParams {
    let job = scenario
        .job(name)
        .label(CLUSTER_KEY, WORKER_A)
        .run_for("600s");
    let uid = scenario.create(job).await;
    let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
    wait::until("the mirror's Pod", TIMEOUT, || async {
        match pods.list(&selector).await {
            Ok(list) if !list.items.is_empty() => Seen::Ready(()),
            other => Seen::Waiting(format!("{:?}", other.map(|l| l.items.len()))),
        }
    })
    .await;
    selector
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_orphan_sweep_deletes_only_this_origins_unwanted_objects() {
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("sweep").await;
    let relay = scenario.relay;
    let jobs: Api<Job> = scenario.worker_api(WORKER_A).await;
    let pods: Api<Pod> = scenario.worker_api(WORKER_A).await;

    // A mirror whose Job is deleted on the worker with --cascade=orphan,
    // leaving its Pod behind while the manager Job is deleted.
    let selector = long_running_on_a(&scenario, &pods, "orphaned").await;
    relay.kill_agent(WORKER_A);
    jobs.delete("orphaned", &DeleteParams::orphan())
        .await
        .unwrap();
    scenario
        .jobs
        .delete("orphaned", &DeleteParams::default())
        .await
        .unwrap();

    // Objects of this origin nobody wants, of another origin, and of none.
    let stray = |name: &str, origin: Option<&str>| {
        let mut job =
            jobrelay_testbed::objects::fixtures::TestJob::new(&scenario.ns, name).run_for("600s");
        if let Some(origin) = origin {
            job = job
                .label(ORIGIN_LABEL, origin)
                .label(ORIGIN_UID_LABEL, &format!("stray-{name}"));
        }
        job.build()
    };
    for (name, origin) in [
        ("stray-ours", Some(relay.origin.as_str())),
        ("stray-other-origin", Some("another-manager")),
        ("stray-unlabelled", None),
    ] {
        jobs.create(&PostParams::default(), &stray(name, origin))
            .await
            .unwrap();
    }

    relay.restart_agent(WORKER_A).await.unwrap();
    wait::until(
        "the orphaned Pod and this origin's stray Job gone",
        TIMEOUT,
        || async {
            let orphaned = pods.list(&selector).await.map(|l| l.items.len());
            let stray = jobs.get_opt("stray-ours").await.map(|j| j.is_some());
            match (orphaned, stray) {
                (Ok(0), Ok(false)) => Seen::Ready(()),
                seen => Seen::Waiting(format!("{seen:?} (orphaned Pods, stray Job present)")),
            }
        },
    )
    .await;
    // A stray of this origin that appears while connected goes on the next periodic sweep.
    jobs.create(
        &PostParams::default(),
        &stray("stray-later", Some(relay.origin.as_str())),
    )
    .await
    .unwrap();
    wait::until("the later stray Job swept", TIMEOUT, || async {
        match jobs.get_opt("stray-later").await {
            Ok(None) => Seen::Ready(()),
            other => Seen::Waiting(format!("{:?}", other.map(|j| j.map(|j| j.name_any())))),
        }
    })
    .await;
    for name in ["stray-other-origin", "stray-unlabelled"] {
        assert!(
            jobs.get_opt(name).await.unwrap().is_some(),
            "{name} must never be touched"
        );
        jobs.delete(name, &DeleteParams::background())
            .await
            .unwrap();
    }
    wait_no_pods(
        &pods,
        &ListParams::default(),
        "the untouched strays cleaned up by the test",
    )
    .await;
    scenario.finish(TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hundreds_of_orphans_are_swept_at_a_steady_pace_with_progress_in_the_log() {
    use futures::StreamExt;
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("backlog").await;
    let relay = scenario.relay;
    let pods: Api<Pod> = scenario.worker_api(WORKER_A).await;
    let pod = |i: usize, origin: &str| Pod {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("left-{origin}-{i}")),
            labels: Some(BTreeMap::from([
                (ORIGIN_LABEL.to_string(), origin.to_string()),
                (ORIGIN_UID_LABEL.to_string(), format!("gone-{i}")),
            ])),
            ..Default::default()
        },
        spec: Some(jobrelay_testbed::objects::fixtures::pod_spec()),
        ..Default::default()
    };
    // Pods of this origin whose Jobs the manager no longer knows, as a long
    // absence would leave them, and a few of another origin.
    let ours = 300;
    let started = k8s_openapi::jiff::Timestamp::now();
    let progress_before = relay
        .agent_log(WORKER_A)
        .matches("working off a backlog")
        .count();
    let created: Vec<bool> = futures::stream::iter(0..ours)
        .map(|i| {
            let pods = pods.clone();
            let pod = pod(i, &relay.origin);
            async move { pods.create(&PostParams::default(), &pod).await.is_ok() }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(created.iter().all(|ok| *ok), "every orphan Pod created");
    for i in 0..3 {
        pods.create(&PostParams::default(), &pod(i, "another-manager"))
            .await
            .unwrap();
    }
    let swept = Instant::now();
    let manager = kit::client(scenario.clusters.manager()).await;
    let held = wait_cluster_event(manager, WORKER_A, "DeletionsHeld", started).await;
    println!("held: {held}");
    let selector = ListParams::default().labels(&format!("{ORIGIN_LABEL}={}", relay.origin));
    wait_no_pods(&pods, &selector, "every orphan Pod of this origin swept").await;
    println!(
        "{ours} orphan Pods held for {BRAKE_CONFIRM}, then swept within {:?} of their creation",
        swept.elapsed()
    );
    let progress = relay
        .agent_log(WORKER_A)
        .matches("working off a backlog")
        .count();
    assert!(
        progress > progress_before,
        "the backlog's progress is logged"
    );
    let other = pods
        .list(&ListParams::default().labels(&format!("{ORIGIN_LABEL}=another-manager")))
        .await
        .unwrap();
    assert_eq!(
        other.items.len(),
        3,
        "another origin's Pods are never touched"
    );
    for i in 0..3 {
        pods.delete(
            &format!("left-another-manager-{i}"),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
    }
    wait_no_pods(
        &pods,
        &ListParams::default(),
        "the other origin's Pods removed by the test",
    )
    .await;
    scenario.finish(TIMEOUT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mirror_the_manager_forgot_mid_session_is_swept_within_a_few_heartbeats() {
    let _exclusive = EXCLUSIVE.lock().await;
    let scenario = setup("drift").await;
    let relay = scenario.relay;
    let jobs: Api<Job> = scenario.worker_api(WORKER_A).await;
    let pods: Api<Pod> = scenario.worker_api(WORKER_A).await;
    let selector = long_running_on_a(&scenario, &pods, "forgotten").await;
    let sessions = relay.sessions_opened(WORKER_A);
    let resyncs = format!("jobrelay_desired_set_resyncs_total{{cluster=\"{WORKER_A}\"}}");
    let resyncs_before = relay.metric(&resyncs).await.unwrap().unwrap_or(0.0);

    // Behind the manager's back, while it is paused for a moment (shorter
    // than the three heartbeats after which either side drops the session):
    // its Job loses jobrelay's finalizer and is deleted at once, so the
    // manager never sees it deleting and never sends a DeleteMirror. The
    // agent still holds the mirror as wanted, so no periodic sweep takes it.
    relay
        .signal_replica(0, libc::SIGSTOP)
        .expect("pausing the manager");
    let paused = Instant::now();
    let released = async {
        let unfinalized = serde_json::json!({"metadata": {"finalizers": null}});
        scenario
            .jobs
            .patch(
                "forgotten",
                &PatchParams::default(),
                &Patch::Merge(&unfinalized),
            )
            .await?;
        scenario
            .jobs
            .delete("forgotten", &DeleteParams::background())
            .await
    }
    .await;
    relay
        .signal_replica(0, libc::SIGCONT)
        .expect("resuming the manager");
    released.unwrap_or_else(|e| panic!("releasing and deleting the manager Job: {e}"));
    println!("manager paused for {:?}", paused.elapsed());

    // The agent's Heartbeats now say it holds a mirror the manager does not
    // want: twice in a row, and the DesiredSet comes again.
    let forgotten = Instant::now();
    wait::until(
        "the forgotten mirror and its Pods swept",
        Duration::from_secs(60),
        || async {
            let job = jobs.get_opt("forgotten").await.map(|j| j.is_some());
            let left = pods.list(&selector).await.map(|l| l.items.len());
            match (job, left) {
                (Ok(false), Ok(0)) => Seen::Ready(()),
                seen => Seen::Waiting(format!("{seen:?} (mirror present, Pods left)")),
            }
        },
    )
    .await;
    println!(
        "swept within {:?} of the manager forgetting it",
        forgotten.elapsed()
    );
    let resyncs_after = relay.metric(&resyncs).await.unwrap().unwrap_or(0.0);
    assert!(
        resyncs_after > resyncs_before,
        "the manager sent the DesiredSet again ({resyncs_before} resyncs before, {resyncs_after} after)"
    );
    assert_eq!(
        relay.sessions_opened(WORKER_A),
        sessions,
        "the session stayed open: the sweep came from anti-entropy, not a reconnect"
    );
    assert!(
        relay.manager_log().contains("sending the DesiredSet again"),
        "the resync is logged"
    );
    scenario.finish(TIMEOUT).await;
}
