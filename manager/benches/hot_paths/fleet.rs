//! The fleet's work: an agent's inventory taken on (re)connect, and a wave
//! of new Jobs placed over many clusters.

use divan::{Bencher, black_box};
use jobrelay_manager::fleet::Fleet;
use jobrelay_manager::job::placement::Wants;
use jobrelay_manager::kinds::Key;
use jobrelay_manager::outbox::Outbox;
use jobrelay_proto::v1::{DesiredMirror, InventoryEntry, MirrorPhase};
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

/// Mirrors a cluster holds (and the manager wants) for the reconnect benches.
const MIRRORS: usize = 10_000;

/// A UID shaped like the API server's, its first part scattered.
fn uid(i: usize) -> String {
    let scattered = (i as u32).wrapping_mul(2_654_435_761);
    format!("{scattered:08x}-{:04x}-4000-8000-{i:012x}", i % 0xffff)
}

fn inventory() -> Vec<InventoryEntry> {
    (0..MIRRORS)
        .map(|i| InventoryEntry {
            origin_uid: uid(i),
            revision: 1 + (i % 3) as u64,
            phase: MirrorPhase::Running as i32,
            kind: None,
            namespace: String::new(),
        })
        .collect()
}

fn desired() -> Vec<(DesiredMirror, Key)> {
    (0..MIRRORS)
        .map(|i| {
            let namespace = format!("team-{}", i % 50);
            let name = format!("job-{i}");
            let key = Key::of(&ObjectRef::<Job>::new(&name).within(&namespace));
            let mirror = DesiredMirror {
                origin_uid: uid(i),
                namespace: String::new(),
            };
            (mirror, key)
        })
        .collect()
}

/// A fleet, its reconcile queue, and the agent's outbox, kept alive (and
/// dropped) outside the measured part.
struct Reconnect {
    fleet: Fleet,
    _triggers: mpsc::UnboundedReceiver<Key>,
    outbox: Outbox,
    _agent: mpsc::Receiver<jobrelay_proto::v1::ManagerMessage>,
    desired: Vec<(DesiredMirror, Key)>,
}

/// Room for every message a bench queues: a full outbox would drop them
/// and time something cheaper than a send.
const BENCH_OUTBOX: usize = 1 << 20;

fn reconnect_input(
    inventory: &[InventoryEntry],
    desired: &[(DesiredMirror, Key)],
    known: bool,
) -> Reconnect {
    let (triggers, mut triggered) = mpsc::unbounded_channel();
    let fleet = Fleet::new(triggers);
    if known {
        let (outbox, _agent) = Outbox::new(BENCH_OUTBOX);
        let session = fleet.connect(
            "worker-gpu-a",
            "0.1.0",
            inventory,
            desired.to_vec(),
            Vec::new(),
            outbox,
        );
        fleet.disconnect("worker-gpu-a", session);
        while triggered.try_recv().is_ok() {}
    }
    let (outbox, agent) = Outbox::new(BENCH_OUTBOX);
    Reconnect {
        fleet,
        _triggers: triggered,
        outbox,
        _agent: agent,
        desired: desired.to_vec(),
    }
}

/// The first session of a cluster: 10,000 held, 10,000 desired.
#[divan::bench(sample_count = 30)]
fn fleet_connect_first(bencher: Bencher) {
    fleet_connect(bencher, false);
}

/// A reconnect: the fleet already knows the cluster's 10,000 mirrors.
#[divan::bench(sample_count = 30)]
fn fleet_connect_again(bencher: Bencher) {
    fleet_connect(bencher, true);
}

fn fleet_connect(bencher: Bencher, known: bool) {
    let inventory = inventory();
    let desired = desired();
    bencher
        .with_inputs(|| reconnect_input(&inventory, &desired, known))
        .bench_local_refs(|input| {
            input.fleet.connect(
                "worker-gpu-a",
                "0.1.0",
                black_box(&inventory),
                std::mem::take(&mut input.desired),
                Vec::new(),
                input.outbox.clone(),
            )
        });
}

/// A fleet with `clusters` connected clusters and nothing placed yet; the
/// agents' ends are kept so no session counts as ended.
struct Placing {
    fleet: Fleet,
    _triggers: mpsc::UnboundedReceiver<Key>,
    _agents: Vec<mpsc::Receiver<jobrelay_proto::v1::ManagerMessage>>,
}

fn placing_input(clusters: usize) -> Placing {
    let (triggers, triggered) = mpsc::unbounded_channel();
    let fleet = Fleet::new(triggers);
    let agents = (0..clusters)
        .map(|c| {
            let (outbox, agent) = Outbox::new(BENCH_OUTBOX);
            let name = format!("worker-{c:04}");
            fleet.connect(&name, "0.1.0", &[], Vec::new(), Vec::new(), outbox);
            agent
        })
        .collect();
    Placing {
        fleet,
        _triggers: triggered,
        _agents: agents,
    }
}

/// A wave of 10,000 new Jobs placed over 2 to 3,000 connected clusters, one
/// `Fleet::place` each; divide the time by 10,000 for one placement.
#[divan::bench(sample_count = 10, args = [2, 100, 1000, 3000])]
fn fleet_place_wave(bencher: Bencher, clusters: usize) {
    let jobs: Vec<(String, Key)> = desired()
        .into_iter()
        .map(|(mirror, key)| (mirror.origin_uid, key))
        .collect();
    bencher
        .counter(divan::counter::ItemsCount::new(MIRRORS))
        .with_inputs(|| placing_input(clusters))
        .bench_local_refs(|input| {
            for (uid, key) in &jobs {
                black_box(input.fleet.place(uid, key, Wants::default(), |_| true));
            }
        });
}
