//! The Relay refuses before it listens: peers the CA did not vouch for are
//! refused in the TLS handshake, and what any peer can make the leader hold
//! is bounded. A thousand such peers flooding the leader change neither its
//! memory much nor the work of the real agent beside them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jobrelay_e2e::flood::{Flood, rss_bytes};
use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_process::Pem;
use jobrelay_proto::v1::relay_client::RelayClient;
use jobrelay_proto::v1::{AgentMessage, Hello, InventoryEntry, agent_message};
use jobrelay_proto::wire::CLUSTER_KEY;
use jobrelay_testbed::certs::self_signed_client;
use jobrelay_testbed::relay::Relay;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

use super::EXCLUSIVE;

/// The worker whose real agent works through the flood.
pub(super) const WORKER: &str = "worker-1";
/// Flooding connections at once.
const CONNECTIONS: usize = 1000;
/// Jobs timed before the flood, and again during it.
const JOBS: usize = 10;
/// The flood lasts at least this long.
const FLOOD_FOR: Duration = Duration::from_secs(30);
/// What the flood may add to the leader's resident memory.
pub(super) const RSS_BOUND: u64 = 50 * 1024 * 1024;

pub(super) const MIB: f64 = 1024.0 * 1024.0;

/// Creates `JOBS` Jobs pinned to [`WORKER`], one after another, each timed
/// from its creation until its mirror exists on the worker; waits for all
/// to complete. Returns the times.
pub(super) async fn dispatch_times(s: &Scenario, phase: &str) -> Vec<Duration> {
    let mirrors: Api<Job> = s.worker_api(WORKER).await;
    let mut times = Vec::new();
    for index in 0..JOBS {
        let name = format!("{phase}-{index}");
        let created = Instant::now();
        s.create(s.job(&name).label(CLUSTER_KEY, WORKER).run_for("1s"))
            .await;
        let took = mirrored(&mirrors, &name, created).await;
        times.push(took);
    }
    for index in 0..JOBS {
        s.wait_condition(&format!("{phase}-{index}"), "Complete")
            .await;
    }
    times
}

/// How long after `created` the mirror `name` exists, polled finer than
/// the kit's waits so the figure is not the poll interval's.
async fn mirrored(mirrors: &Api<Job>, name: &str, created: Instant) -> Duration {
    let mut ticks = tokio::time::interval(Duration::from_millis(10));
    let mut last_seen = String::from("nothing yet");
    while created.elapsed() < WAIT {
        ticks.tick().await;
        match mirrors.get_opt(name).await {
            Ok(Some(_)) => return created.elapsed(),
            Ok(None) => last_seen = "no mirror yet".into(),
            Err(e) => last_seen = e.to_string(),
        }
    }
    panic!(
        "timed out after {WAIT:?} waiting for the mirror of {name} on {WORKER}; last saw: {last_seen}"
    )
}

/// Median and largest of `times`, for the report.
pub(super) fn summary(times: &[Duration]) -> String {
    let mut sorted = times.to_vec();
    sorted.sort();
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    let max = sorted.last().copied().unwrap_or_default();
    format!(
        "median {median:.2?}, max {max:.2?} over {} Jobs",
        times.len()
    )
}

/// Waits until `flood_for` passed since `started`.
pub(super) async fn lasted(started: Instant, flood_for: Duration) {
    wait::until(
        format!("the flood to have lasted {flood_for:?}"),
        flood_for + WAIT,
        || async {
            match started.elapsed() >= flood_for {
                true => Seen::Ready(()),
                false => Seen::Waiting(format!("{:?} so far", started.elapsed())),
            }
        },
    )
    .await;
}

/// Prints the leader's memory at rest and its peak under a flood, and the
/// dispatch times without and with it.
pub(super) fn print_figures(idle: u64, peak: u64, calm: &[Duration], flooded: &[Duration]) {
    println!(
        "leader RSS: idle {:.1} MiB, peak under flood {:.1} MiB (+{:.1} MiB; bound +{:.0} MiB)",
        idle as f64 / MIB,
        peak as f64 / MIB,
        (peak - idle) as f64 / MIB,
        RSS_BOUND as f64 / MIB
    );
    println!(
        "dispatch (creation to mirror on {WORKER}) without flood: {}",
        summary(calm)
    );
    println!(
        "dispatch (creation to mirror on {WORKER}) under flood:   {}",
        summary(flooded)
    );
}

/// Samples the resident memory of `pid` until `stop`; the largest seen.
pub(super) fn sample_rss(
    pid: u32,
    stop: Arc<AtomicBool>,
) -> (Arc<AtomicU64>, tokio::task::JoinHandle<()>) {
    let peak = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&peak);
    let sampler = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(Duration::from_millis(100));
        // Bounded: far longer than any flood of this file.
        for _ in 0..36_000 {
            ticks.tick().await;
            if stop.load(Ordering::Relaxed) {
                return;
            }
            if let Ok(rss) = rss_bytes(pid) {
                seen.fetch_max(rss, Ordering::Relaxed);
            }
        }
    });
    (peak, sampler)
}

async fn refused(relay: &Relay, reason: &str) -> f64 {
    relay
        .metric(&format!(
            "jobrelay_sessions_refused_total{{reason=\"{reason}\"}}"
        ))
        .await
        .ok()
        .flatten()
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_untrusted_peers_with_slow_hellos_move_neither_the_leaders_memory_nor_the_real_agents_jobs()
 {
    let _exclusive = EXCLUSIVE.lock().await;
    let s = Scenario::relayed("flood").await;
    let relay = s.relay;
    let pid = relay.replica_pid(0).expect("the leader runs");

    // Before: the real agent's dispatch times, then the leader's memory
    // at rest with that work done.
    let calm = dispatch_times(&s, "calm").await;
    let idle = rss_bytes(pid).unwrap();
    let sessions = relay.sessions_opened(WORKER);

    let handshakes_before = refused(relay, "certificate_untrusted").await;
    let limited_before = refused(relay, "handshake_limit").await;
    let stop = Arc::new(AtomicBool::new(false));
    let (peak, sampler) = sample_rss(pid, Arc::clone(&stop));
    let started = Instant::now();
    let ca = std::fs::read(relay.ca_path()).unwrap();
    let flood = Flood::start(
        &relay.manager_url,
        &ca,
        &self_signed_client(WORKER).unwrap(),
        WORKER,
        CONNECTIONS,
    )
    .unwrap();
    wait::until(
        format!("{CONNECTIONS} flooding connections dialled"),
        WAIT,
        || async {
            let counts = flood.counts();
            match counts.dials >= CONNECTIONS as u64 {
                true => Seen::Ready(()),
                false => Seen::Waiting(format!("{counts:?}")),
            }
        },
    )
    .await;

    // During: the same work, timed the same way; it must get done.
    let flooded = dispatch_times(&s, "flooded").await;
    lasted(started, FLOOD_FOR).await;
    let counts = flood.counts();
    let lasted = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    drop(flood);
    let peak = peak.load(Ordering::Relaxed).max(idle);
    let untrusted = refused(relay, "certificate_untrusted").await - handshakes_before;
    let limited = refused(relay, "handshake_limit").await - limited_before;

    println!(
        "flood: {CONNECTIONS} peers with self-signed certificates and slow Hellos for {lasted:.1?}: {} dials, {} refused, {} answered; the leader refused {untrusted} handshakes as certificate_untrusted and closed {limited} connections at the handshake limit",
        counts.dials, counts.refused, counts.answered
    );
    print_figures(idle, peak, &calm, &flooded);

    assert_eq!(counts.answered, 0, "no flooding peer got a session");
    assert!(untrusted > 0.0, "the handshakes were refused as untrusted");
    assert_held(relay, idle, peak, sessions);
}

/// Asserts what a flood must leave: the leader's memory within
/// [`RSS_BOUND`] of `idle`, and the real agent's session (of `sessions`
/// opened before) unbroken.
pub(super) fn assert_held(relay: &Relay, idle: u64, peak: u64, sessions: usize) {
    assert!(
        peak - idle < RSS_BOUND,
        "the flood added {:.1} MiB to the leader's memory",
        (peak - idle) as f64 / MIB
    );
    assert_eq!(
        relay.sessions_opened(WORKER),
        sessions,
        "the real agent kept its session through the flood"
    );
}

/// A channel to the Relay presenting a certificate the CA issued for
/// `cluster` (registered or not).
pub(super) async fn vouched_for(relay: &Relay, cluster: &str) -> Channel {
    let identity = relay.ca().client(cluster).unwrap();
    let tls = jobrelay_process::client::client_config(&Pem {
        cert: identity.cert.into_bytes(),
        key: identity.key.into_bytes(),
        ca: std::fs::read(relay.ca_path()).unwrap(),
    });
    Endpoint::from_shared(relay.manager_url.clone())
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .expect("a vouched-for peer completes its handshake")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_peer_the_ca_vouches_for_gets_seconds_for_its_hello_and_no_more_than_a_hellos_size() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (_clusters, relay) = jobrelay_testbed::kit::relay().await;

    // Vouched for as a cluster this manager does not know: refused before
    // a byte of its Hello is read.
    let before = refused(relay, "unknown_cluster").await;
    let opened = Instant::now();
    let ghost = RelayClient::new(vouched_for(relay, "ghost").await)
        .connect(futures::stream::pending::<AgentMessage>())
        .await
        .expect_err("no session for a cluster not registered");
    println!(
        "an unregistered cluster: {:?} after {:.1?}: {}",
        ghost.code(),
        opened.elapsed(),
        ghost.message()
    );
    assert_eq!(ghost.code(), Code::PermissionDenied, "{ghost:?}");
    assert!(ghost.message().contains("ghost"), "{ghost:?}");
    assert_eq!(refused(relay, "unknown_cluster").await, before + 1.0);

    // A registered cluster's certificate that says nothing: cut at the
    // Hello deadline. (No Hello, no session: worker-2's agent keeps its.)
    let before = refused(relay, "hello_timeout").await;
    let opened = Instant::now();
    let silent = RelayClient::new(vouched_for(relay, "worker-2").await)
        .connect(futures::stream::pending::<AgentMessage>())
        .await
        .expect_err("no session without a Hello");
    let waited = opened.elapsed();
    println!(
        "no Hello: {:?} after {waited:.1?}: {}",
        silent.code(),
        silent.message()
    );
    assert_eq!(silent.code(), Code::DeadlineExceeded, "{silent:?}");
    assert!(waited < Duration::from_secs(15), "cut within the deadline");
    assert_eq!(refused(relay, "hello_timeout").await, before + 1.0);

    // A Hello larger than any inventory: refused unread.
    let before = refused(relay, "message_too_large").await;
    let inventory = (0..100_000)
        .map(|i| InventoryEntry {
            origin_uid: format!("00000000-0000-0000-0000-{i:012}"),
            revision: 1,
            phase: 0,
            kind: None,
            namespace: String::new(),
        })
        .collect();
    let hello = AgentMessage {
        kind: Some(agent_message::Kind::Hello(Hello {
            cluster: "worker-2".into(),
            agent_version: env!("CARGO_PKG_VERSION").into(),
            inventory,
            ..Hello::default()
        })),
    };
    let oversized = RelayClient::new(vouched_for(relay, "worker-2").await)
        .max_encoding_message_size(16 * 1024 * 1024)
        .connect(futures::stream::iter([hello]).chain(futures::stream::pending()))
        .await
        .expect_err("an oversized Hello opens no session");
    println!(
        "a Hello of 100,000 entries: {:?}: {}",
        oversized.code(),
        oversized.message()
    );
    assert_eq!(oversized.code(), Code::ResourceExhausted, "{oversized:?}");
    assert_eq!(refused(relay, "message_too_large").await, before + 1.0);
}

use futures::StreamExt;
