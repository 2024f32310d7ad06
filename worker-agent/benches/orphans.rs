//! Micro-benchmark of the agent's orphan decision: which of the mirrors held
//! on a worker the manager's DesiredSet no longer wants.
//!
//! Run with `cargo bench -p jobrelay-agent --bench orphans`.

use std::collections::HashSet;

use divan::{Bencher, black_box};
use jobrelay_agent::{HeldMirror, orphans};
use jobrelay_proto::holding::OriginUids;

fn main() {
    divan::main();
}

/// Mirrors held on the worker, each a Job and one Pod.
const HELD: usize = 10_000;

/// A UID shaped like the API server's, its first part scattered.
fn uid(i: usize) -> String {
    let scattered = (i as u32).wrapping_mul(2_654_435_761);
    format!("{scattered:08x}-{:04x}-4000-8000-{i:012x}", i % 0xffff)
}

/// What `sweep_orphans` reads from the watches: every Job, then every Pod.
fn held() -> Vec<HeldMirror> {
    let jobs = (0..HELD).map(|i| HeldMirror {
        origin_uid: uid(i),
        namespace: format!("team-{}", i % 50),
        name: format!("job-{i}"),
        stopped: false,
    });
    let pods = (0..HELD).map(|i| HeldMirror {
        origin_uid: uid(i),
        namespace: format!("team-{}", i % 50),
        name: String::new(),
        stopped: false,
    });
    jobs.chain(pods).collect()
}

/// 10,000 mirrors held, of which `not_desired` the manager no longer wants
/// (0: the steady state, nothing to sweep).
#[divan::bench(args = [0, 1_000])]
fn orphans_of_10k(bencher: Bencher, not_desired: usize) {
    let held = held();
    let desired: OriginUids = (not_desired..HELD).map(uid).collect();
    let deleting: HashSet<String> = HashSet::new();
    bencher
        .with_inputs(|| held.clone())
        .bench_local_values(|held| {
            orphans(black_box(held), black_box(&desired), |uid| {
                deleting.contains(uid)
            })
        });
}
