//! A burst of Jobs over workers of uneven room: room promised to Jobs
//! placed but not started yet counts, so no worker is given more than it
//! can run — no Pod of the burst is ever left Unschedulable there — and
//! the Jobs that wait on the manager run as room frees up.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::{StreamExt, TryStreamExt};
use jobrelay_testbed::cluster::pools::NodePool;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use super::{Fleet, TIMEOUT, placed_on, small};

const JOBS: usize = 100;

/// Whether the scheduler left `pod` Pending for want of room.
fn unschedulable(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.into_iter().flatten().any(|c| {
        c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
    })
}

/// The names of the Pods the scheduler left Unschedulable, as a watch of
/// `pods` sees them for as long as it runs.
struct Unschedulable {
    seen: Arc<Mutex<BTreeSet<String>>>,
    watching: tokio::task::JoinHandle<()>,
}

impl Unschedulable {
    fn watch(pods: Api<Pod>) -> Unschedulable {
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let found = Arc::clone(&seen);
        let watching = tokio::spawn(async move {
            let mut events = watcher(pods, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Ok(Some(pod)) = events.try_next().await {
                if unschedulable(&pod) {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    found.lock().expect("not poisoned").insert(name);
                }
            }
        });
        Unschedulable { seen, watching }
    }

    /// Stops watching; what was seen.
    fn stop(self) -> BTreeSet<String> {
        self.watching.abort();
        self.seen.lock().expect("not poisoned").clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_over_uneven_workers_never_overfills_one() {
    let large = NodePool::new("burst-2-large", 2).cpu("16").memory("64Gi");
    let fleet = Fleet::start(
        "burst",
        [vec![small("burst-1")], vec![small("burst-2"), large]],
    )
    .await;
    let s = &fleet.scenario;
    let mut watches = Vec::new();
    for worker in ["worker-1", "worker-2"] {
        watches.push((worker, Unschedulable::watch(s.worker_api(worker).await)));
    }

    // 100 one-CPU Jobs; the workers run 8 and 40 at once.
    let mut expected = BTreeMap::new();
    for i in 0..JOBS {
        let name = format!("burst-{i}");
        s.create(s.job(&name).cpu("1").run_for("2s")).await;
        expected.insert(name, "Complete");
    }
    s.wait_outcomes(&expected, TIMEOUT * 2).await;

    let mut per_worker: BTreeMap<String, usize> = BTreeMap::new();
    for name in expected.keys() {
        let worker = placed_on(s, name).await.unwrap_or_default();
        *per_worker.entry(worker).or_default() += 1;
    }
    for (worker, watch) in watches {
        let seen = watch.stop();
        assert!(
            seen.is_empty(),
            "{worker} was given more than it had room for: {seen:?} Unschedulable"
        );
    }
    println!("Jobs per worker: {per_worker:?}");
    assert_eq!(per_worker.values().sum::<usize>(), JOBS);
    // What the room costs each agent: the events its two room watches took
    // (since the agent started; the burst is most of them).
    for worker in per_worker.keys() {
        let metrics = s.relay.agent_metrics(worker).await.expect("agent metrics");
        let events: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("jobrelay_agent_room_watch_events_total"))
            .collect();
        println!("{worker}: {events:?}");
    }
    fleet.finish().await;
}
