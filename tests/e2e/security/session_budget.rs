//! One agent certificate cannot exhaust the leader: a registered cluster's
//! certificate, in the hands of a peer that says Hello and then pushes the
//! largest status a session takes, as fast as two connections carry it, for
//! mirrors it does not hold. Each session is cut once it sends more bytes a
//! second than any agent needs, and the cluster's next Hellos are refused
//! for a while; the WorkerCluster says why; the leader's memory barely
//! moves; and the real agent beside it keeps its session and its Jobs get
//! dispatched.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use jobrelay_e2e::flood::rss_bytes;
use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_proto::v1::relay_client::RelayClient;
use jobrelay_proto::v1::{AgentMessage, Hello, MirrorStatus, agent_message};
use jobrelay_testbed::kit;
use jobrelay_testbed::relay::registration::register_on;
use jobrelay_testbed::wait::{self, Seen};
use kube::api::Api;
use tonic::Code;

use super::EXCLUSIVE;
use super::relay::{
    WORKER, assert_held, dispatch_times, lasted, print_figures, sample_rss, vouched_for,
};

/// The registered cluster whose certificate floods.
const FLOODER: &str = "flooder";
/// Connections flooding at once.
const CONNECTIONS: usize = 2;
/// The flood lasts at least this long.
const FLOOD_FOR: Duration = Duration::from_secs(20);
/// Far longer than a flooding session may last.
const SESSION_BOUND: Duration = Duration::from_secs(120);
/// Each status: just under the 256 KiB a MirrorStatus may be.
const STATUS_BYTES: usize = 250 * 1024;

/// One connection's flood: sessions opened one after another until
/// `stop`, each saying Hello and then sending statuses until the manager
/// ends it (a session under way when `stop` is set floods on until then, so
/// the last end is the manager's); how each ended.
async fn flood(
    relay: &'static jobrelay_testbed::relay::Relay,
    stop: Arc<AtomicBool>,
) -> Vec<tonic::Status> {
    let status = AgentMessage {
        kind: Some(agent_message::Kind::MirrorStatus(MirrorStatus {
            origin_uid: "00000000-0000-0000-0000-000000000000".into(),
            status: vec![b' '; STATUS_BYTES],
            ..MirrorStatus::default()
        })),
    };
    let mut ends = Vec::new();
    // Bounded: each try takes a handshake at least.
    for _ in 0..10_000 {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let hello = AgentMessage {
            kind: Some(agent_message::Kind::Hello(Hello {
                cluster: FLOODER.into(),
                agent_version: env!("CARGO_PKG_VERSION").into(),
                ..Hello::default()
            })),
        };
        let status = status.clone();
        let outbound = futures::stream::iter([hello])
            .chain(futures::stream::repeat_with(move || status.clone()));
        let mut client = RelayClient::new(vouched_for(relay, FLOODER).await);
        let mut inbound = match client.connect(outbound).await {
            Ok(response) => response.into_inner(),
            Err(refused) => {
                // Held off after a cut: the flooder retries every 100 ms (its
                // pace, not a wait for a condition), faster than any agent.
                ends.push(refused);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let ended = tokio::time::timeout(SESSION_BOUND, async {
            loop {
                match inbound.next().await {
                    Some(Ok(_)) => {}
                    Some(Err(end)) => return Some(end),
                    None => return None,
                }
            }
        })
        .await;
        match ended {
            Ok(end) => ends.extend(end),
            Err(_) => panic!("a flooding session was not ended within {SESSION_BOUND:?}"),
        }
    }
    ends
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_agent_certificate_pushing_the_largest_statuses_is_cut_and_the_leader_holds() {
    let _exclusive = EXCLUSIVE.lock().await;
    let s = Scenario::relayed("budget").await;
    let relay = s.relay;
    let manager = kit::client(s.clusters.manager()).await;
    register_on(manager.clone(), [FLOODER])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let pid = relay.replica_pid(0).expect("the leader runs");
    let calm = dispatch_times(&s, "calm").await;
    let idle = rss_bytes(pid).expect("the leader's RSS, from /proc");
    let sessions = relay.sessions_opened(WORKER);
    let cut = "jobrelay_sessions_cut_total{reason=\"over_budget\"}";
    let cut_before = relay.metric(cut).await.ok().flatten().unwrap_or(0.0);

    let stop = Arc::new(AtomicBool::new(false));
    let (peak, sampler) = sample_rss(pid, Arc::clone(&stop));
    let started = Instant::now();
    let floods: Vec<_> = (0..CONNECTIONS)
        .map(|_| tokio::spawn(flood(relay, Arc::clone(&stop))))
        .collect();
    let flooded = dispatch_times(&s, "flooded").await;
    lasted(started, FLOOD_FOR).await;
    stop.store(true, Ordering::Relaxed);
    let mut ends = Vec::new();
    for flood in floods {
        ends.extend(flood.await.expect("a flood ran"));
    }
    let lasted = started.elapsed();
    let _ = sampler.await;
    let peak = peak.load(Ordering::Relaxed).max(idle);
    let cuts = relay.metric(cut).await.ok().flatten().unwrap_or(0.0) - cut_before;

    let exhausted = |says: &'static str| {
        ends.iter().filter(move |end| {
            end.code() == Code::ResourceExhausted && end.message().contains(says)
        })
    };
    let over: Vec<&tonic::Status> = exhausted("session ended").collect();
    let held_off = exhausted("dial again in").count();
    println!(
        "one certificate, {CONNECTIONS} connections, {} KiB statuses for {lasted:.1?}: {} sessions cut over budget (metric: {cuts}), {held_off} Hellos refused while held off; e.g. {:?}",
        STATUS_BYTES / 1024,
        over.len(),
        over.first().map(|s| s.message())
    );
    print_figures(idle, peak, &calm, &flooded);

    let message = over
        .first()
        .map(|s| s.message().to_string())
        .expect("a session was cut over its budget");
    assert!(
        message.contains("more than") && message.contains("bytes a second"),
        "{message}"
    );
    assert!(cuts >= 1.0, "counted as over_budget");
    assert!(
        held_off > 0,
        "a cluster cut over its budget is held off before its next session"
    );
    let clusters: Api<WorkerCluster> = Api::all(manager);
    let shown = wait::until("the WorkerCluster says why", WAIT, || async {
        let cluster = match clusters.get(FLOODER).await {
            Ok(cluster) => cluster,
            Err(e) => return Seen::Waiting(e.to_string()),
        };
        match cluster.condition("Connected") {
            Some(c) if c.status == "False" && c.reason == "SessionCut" => {
                Seen::Ready(c.message.clone())
            }
            other => Seen::Waiting(format!("{other:?}")),
        }
    })
    .await;
    assert!(
        shown.contains("the manager cut the agent's session") && shown.contains("bytes a second"),
        "{shown}"
    );
    assert_held(relay, idle, peak, sessions);
    s.finish(WAIT).await;
}
