//! A Job that fits on no cluster waits on the manager — not on a worker —
//! with what is short on each cluster in its Events, and is placed and runs
//! as soon as a cluster has room.

use std::collections::BTreeMap;

use jobrelay_testbed::cluster::pools::NodePool;

use super::{Fleet, TIMEOUT, placed_on, pool_names, small};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_that_fits_nowhere_waits_on_the_manager_and_runs_once_room_appears() {
    let mut fleet = Fleet::start("waits", [vec![small("waits-1")], vec![small("waits-2")]]).await;
    let s = &fleet.scenario;
    // Two Pods of six CPUs: no node of either worker has six.
    s.create(s.job("too-wide").cpu("6").parallelism(2, 2).run_for("2s"))
        .await;
    let note = s.wait_event("too-wide", "NoRoom").await;
    for worker in ["worker-1", "worker-2"] {
        assert!(
            note.contains(&format!("{worker}: room for 0 of 2 Pods; short of cpu")),
            "{note}"
        );
    }
    assert_eq!(placed_on(s, "too-wide").await, None);
    assert!(
        s.mirrors().await.expect("list mirrors").is_empty(),
        "nothing waits on a worker"
    );

    // A large node joins worker-2.
    let large = NodePool::new("waits-2-large", 1).cpu("16").memory("64Gi");
    fleet.rooms[1]
        .add_pool(&large)
        .await
        .expect("add the large pool");
    let s = &fleet.scenario;
    let mut shown = vec!["waits-2", "waits-2-large"];
    shown.sort_unstable();
    fleet
        .wait_room("worker-2", |room| pool_names(room) == shown)
        .await;
    s.wait_outcomes(
        &BTreeMap::from([("too-wide".to_string(), "Complete")]),
        TIMEOUT,
    )
    .await;
    assert_eq!(placed_on(s, "too-wide").await.as_deref(), Some("worker-2"));
    fleet.finish().await;
}
