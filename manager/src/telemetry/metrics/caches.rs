//! Gauges read from the manager's caches at each scrape, for alerts: each
//! registered WorkerCluster's link as its status shows it (the same on
//! every replica), and the Jobs waiting to be dispatched. The decisions are
//! plain functions over cached objects; the caches are handed over once
//! they exist ([`CacheGauges::read`]), and until then these gauges stay
//! empty or 0.

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::Store;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{ByCluster, by};
use crate::clusters::worker_cluster::{CONNECTED, LOST, WorkerCluster};
use crate::fleet::Fleet;
use crate::job::lifecycle::{Lifecycle, is_relayed, lifecycle};
use crate::job::placement::assigned_cluster;

/// The caches the gauges are read from.
struct Caches {
    jobs: Store<Job>,
    clusters: Store<WorkerCluster>,
}

/// The gauges, and the caches once handed over.
#[derive(Default)]
pub struct CacheGauges {
    caches: OnceLock<Caches>,
    cluster_connected: Family<ByCluster, Gauge>,
    cluster_lost: Family<ByCluster, Gauge>,
    dispatch_waiting: Gauge,
    dispatch_longest_wait: Gauge<f64, std::sync::atomic::AtomicU64>,
}

impl CacheGauges {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cluster_connected",
            "1 while a registered WorkerCluster's status shows it Connected, else 0, by cluster",
            self.cluster_connected.clone(),
        );
        registry.register(
            "cluster_lost",
            "1 while a registered WorkerCluster's status shows it Lost (disconnected for its lostAfter), else 0, by cluster",
            self.cluster_lost.clone(),
        );
        registry.register(
            "dispatch_waiting",
            "Manager Jobs waiting to be dispatched: unplaced and not suspended, or sent to their cluster and not held there yet",
            self.dispatch_waiting.clone(),
        );
        registry.register(
            "dispatch_longest_wait_seconds",
            "The longest wait among jobrelay_dispatch_waiting, in seconds (an unplaced Job's from its creation)",
            self.dispatch_longest_wait.clone(),
        );
    }

    /// Reads the gauges from these caches from now on; only the first
    /// call counts.
    pub fn read(&self, jobs: Store<Job>, clusters: Store<WorkerCluster>) {
        let _ = self.caches.set(Caches { jobs, clusters });
    }

    /// Sets the gauges from the caches, and from `fleet` what was sent.
    pub fn update(&self, fleet: &Fleet) {
        let Some(caches) = self.caches.get() else {
            return;
        };
        self.cluster_connected.clear();
        self.cluster_lost.clear();
        for cluster in caches.clusters.state() {
            let state = cluster_state(&cluster);
            let labels = by(&state.name);
            self.cluster_connected
                .get_or_create(&labels)
                .set(i64::from(state.connected));
            self.cluster_lost
                .get_or_create(&labels)
                .set(i64::from(state.lost));
        }
        let now = Timestamp::now();
        let waiting = waiting(caches.jobs.state().iter().filter_map(|job| {
            dispatch_wait(job, now, |cluster, uid| {
                let sent = fleet.view(cluster, uid)?.state.awaiting_held_since()?;
                Some(sent.elapsed())
            })
        }));
        self.dispatch_waiting.set(waiting.jobs as i64);
        self.dispatch_longest_wait
            .set(waiting.longest.as_secs_f64());
    }
}

/// A registered cluster's link, as its status shows it.
#[derive(Debug, PartialEq, Eq)]
pub struct ClusterState {
    pub name: String,
    pub connected: bool,
    pub lost: bool,
}

pub fn cluster_state(cluster: &WorkerCluster) -> ClusterState {
    let is_true = |kind| cluster.condition(kind).is_some_and(|c| c.status == "True");
    ClusterState {
        name: kube::ResourceExt::name_any(cluster),
        connected: is_true(CONNECTED),
        lost: is_true(LOST),
    }
}

/// How long `job` has waited to be dispatched, if it waits: a relayed Job,
/// neither finished nor being deleted, that is either unplaced and not
/// suspended (no cluster it may go to is connected; counted from its
/// creation, the cache tells no later start), or placed and sent without
/// its worker holding it yet (refused for a reason that can clear, or
/// slow; counted from the send, which `sent_unheld_for(cluster, uid)` tells
/// from the fleet's view — `None` where this replica sent nothing, as a
/// follower). An unplaced suspended Job waits for its queue, not for
/// jobrelay.
pub fn dispatch_wait(
    job: &Job,
    now: Timestamp,
    sent_unheld_for: impl FnOnce(&str, &str) -> Option<Duration>,
) -> Option<Duration> {
    if !is_relayed(job) {
        return None;
    }
    let stage = lifecycle(job);
    if matches!(stage, Lifecycle::Finished | Lifecycle::Deleting) {
        return None;
    }
    match assigned_cluster(job) {
        Some(cluster) => sent_unheld_for(cluster, job.metadata.uid.as_deref()?),
        None if stage == Lifecycle::Active => {
            let created = job.metadata.creation_timestamp.as_ref().map(|t| t.0);
            let waited = created.map(|at| now.duration_since(at));
            Some(waited.and_then(|w| w.try_into().ok()).unwrap_or_default())
        }
        None => None,
    }
}

/// How many wait, and the longest wait among them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Waiting {
    pub jobs: u64,
    pub longest: Duration,
}

pub fn waiting(waits: impl IntoIterator<Item = Duration>) -> Waiting {
    waits
        .into_iter()
        .fold(Waiting::default(), |sum, wait| Waiting {
            jobs: sum.jobs + 1,
            longest: sum.longest.max(wait),
        })
}

#[cfg(test)]
mod tests {
    use jobrelay_proto::wire::{CLUSTER_KEY, MANAGED_BY};
    use serde_json::json;

    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("a time")
    }

    /// A Job created at `at(0)`, relayed unless `managed_by` says otherwise,
    /// with the rest of its metadata, spec and status merged in.
    fn job(managed_by: &str, extra: serde_json::Value) -> Job {
        let mut value = json!({
            "metadata": {"name": "train", "namespace": "ml", "uid": "u1",
                         "creationTimestamp": at(0).to_string()},
            "spec": {"managedBy": managed_by, "template": {}},
        });
        json_patch::merge(&mut value, &extra);
        serde_json::from_value(value).expect("a Job")
    }

    fn placed(on: &str) -> serde_json::Value {
        json!({"metadata": {"annotations": {CLUSTER_KEY: on}}})
    }

    const NEVER_SENT: fn(&str, &str) -> Option<Duration> = |_, _| None;

    #[test]
    fn an_unplaced_running_job_waits_since_its_creation() {
        let unplaced = job(MANAGED_BY, json!({}));
        assert_eq!(
            dispatch_wait(&unplaced, at(400), NEVER_SENT),
            Some(Duration::from_secs(400))
        );
        assert_eq!(
            dispatch_wait(&unplaced, at(-5), NEVER_SENT),
            Some(Duration::ZERO),
            "a clock behind the API server's waits no less than nothing"
        );
        let suspended = job(MANAGED_BY, json!({"spec": {"suspend": true}}));
        assert_eq!(
            dispatch_wait(&suspended, at(400), NEVER_SENT),
            None,
            "its queue's wait"
        );
        let foreign = job("kueue.x-k8s.io/multikueue", json!({}));
        assert_eq!(dispatch_wait(&foreign, at(400), NEVER_SENT), None);
    }

    #[test]
    fn a_placed_job_waits_from_its_send_until_its_worker_holds_it() {
        let sent = |cluster: &str, uid: &str| {
            assert_eq!((cluster, uid), ("worker-a", "u1"));
            Some(Duration::from_secs(7))
        };
        let on_a = job(MANAGED_BY, placed("worker-a"));
        assert_eq!(
            dispatch_wait(&on_a, at(400), sent),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            dispatch_wait(&on_a, at(400), NEVER_SENT),
            None,
            "held, or sent by no one here"
        );
    }

    #[test]
    fn finished_and_deleted_jobs_wait_for_nothing() {
        let finished = json!({"status": {"conditions": [{"type": "Failed", "status": "True"}]}});
        let deleting = json!({"metadata": {"deletionTimestamp": at(1).to_string()}});
        for done in [finished, deleting] {
            let unplaced = job(MANAGED_BY, done.clone());
            assert_eq!(
                dispatch_wait(&unplaced, at(400), NEVER_SENT),
                None,
                "{done}"
            );
            let mut extra = placed("worker-a");
            json_patch::merge(&mut extra, &done);
            let always = |_: &str, _: &str| Some(Duration::from_secs(1));
            assert_eq!(
                dispatch_wait(&job(MANAGED_BY, extra), at(400), always),
                None
            );
        }
    }

    #[test]
    fn the_waits_sum_up_to_a_count_and_the_longest() {
        let waits = [3, 400, 0].map(Duration::from_secs);
        assert_eq!(
            waiting(waits),
            Waiting {
                jobs: 3,
                longest: Duration::from_secs(400)
            }
        );
        assert_eq!(waiting([]), Waiting::default());
    }

    #[test]
    fn a_cluster_is_connected_or_lost_as_its_status_conditions_say() {
        let cluster = |conditions: serde_json::Value| {
            let mut cluster = WorkerCluster::new("worker-a", Default::default());
            cluster.status = serde_json::from_value(json!({"conditions": conditions}))
                .expect("a WorkerCluster status");
            cluster
        };
        let condition = |kind: &str, status: &str| {
            json!({"type": kind, "status": status, "reason": "R", "message": "",
                   "lastTransitionTime": at(0).to_string()})
        };
        let state = |connected, lost| ClusterState {
            name: "worker-a".into(),
            connected,
            lost,
        };
        assert_eq!(
            cluster_state(&cluster(json!([]))),
            state(false, false),
            "never seen"
        );
        let up = cluster(json!([
            condition(CONNECTED, "True"),
            condition(LOST, "False")
        ]));
        assert_eq!(cluster_state(&up), state(true, false));
        let lost = cluster(json!([
            condition(CONNECTED, "False"),
            condition(LOST, "True")
        ]));
        assert_eq!(cluster_state(&lost), state(false, true));
    }

    #[test]
    fn the_gauges_are_read_from_the_caches_once_handed_over() {
        use kube::runtime::{reflector, watcher};
        let (triggers, _) = tokio::sync::mpsc::unbounded_channel();
        let fleet = Fleet::new(triggers);
        let gauges = CacheGauges::default();
        let mut registry = Registry::with_prefix("jobrelay");
        gauges.register(&mut registry);
        let rendered = || {
            gauges.update(&fleet);
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
            text
        };
        assert!(rendered().contains("jobrelay_dispatch_waiting 0\n"));
        let (jobs, mut job_writer) = reflector::store::<Job>();
        let (clusters, mut cluster_writer) = reflector::store::<WorkerCluster>();
        let cluster = WorkerCluster::new("worker-a", Default::default());
        cluster_writer.apply_watcher_event(&watcher::Event::Apply(cluster));
        let created = json!({"metadata": {"creationTimestamp": "2020-01-01T00:00:00Z"}});
        job_writer.apply_watcher_event(&watcher::Event::Apply(job(MANAGED_BY, created)));
        gauges.read(jobs, clusters);
        let text = rendered();
        for line in [
            "jobrelay_cluster_connected{cluster=\"worker-a\"} 0\n",
            "jobrelay_cluster_lost{cluster=\"worker-a\"} 0\n",
            "jobrelay_dispatch_waiting 1\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
        assert!(
            !text.contains("jobrelay_dispatch_longest_wait_seconds 0.0\n"),
            "waiting since 2020: {text}"
        );
    }
}
