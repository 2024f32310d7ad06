//! A worker cut off from the manager while a Job runs there, watched until
//! the Job completes: at each look, which workers run a Pod of it (never
//! two at once), when the cut-off worker showed no Pod of it any more (its
//! agent fenced), and when its WorkerCluster showed `Lost`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_proto::wire::ORIGIN_UID_LABEL;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use super::{Scenario, has_condition};
use jobrelay_testbed::kit;
use jobrelay_testbed::wait::{self, Seen};

/// What the watch over a cut-off worker saw.
#[derive(Debug)]
pub struct CutOff {
    /// Looks at which more than one worker ran a Pod of the Job.
    pub overlaps: Vec<BTreeSet<String>>,
    /// After the cut, when the cut-off worker first showed no Pod of it,
    /// Terminating ones included.
    pub pods_gone: Option<Duration>,
    /// After the cut, when its WorkerCluster first showed `Lost=True`.
    pub lost: Option<Duration>,
    /// The manager Job, complete.
    pub job: Job,
}

impl CutOff {
    /// Asserts what fencing promises, and prints the timings (`clocks`
    /// names the fencing set): no two workers ran the Job at once, and the
    /// cut-off worker's Pods of it were gone before the cluster was Lost.
    pub fn assert_fenced_before_lost(&self, clocks: &str) {
        println!(
            "cut off ({clocks}): Pods gone after {:?}, Lost after {:?}",
            self.pods_gone, self.lost
        );
        assert!(
            self.overlaps.is_empty(),
            "two workers ran the Job at once: {:?}",
            self.overlaps
        );
        let (Some(pods_gone), Some(lost)) = (self.pods_gone, self.lost) else {
            panic!("fenced and Lost both seen: {self:?}");
        };
        assert!(
            pods_gone < lost,
            "the fenced mirror's Pods gone ({pods_gone:?}) before the cluster is Lost ({lost:?})"
        );
    }
}

impl Scenario {
    /// Every worker's Pods of origin UID `uid`: (running ones, all ones).
    pub async fn pods_by_worker(&self, uid: &str) -> BTreeMap<String, (usize, usize)> {
        let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
        let mut seen = BTreeMap::new();
        for worker in self.clusters.workers() {
            let pods: Api<Pod> = self.worker_api(&worker.name).await;
            let Ok(list) = pods.list(&selector).await else {
                continue;
            };
            let running = list
                .items
                .iter()
                .filter(|pod| {
                    pod.metadata.deletion_timestamp.is_none()
                        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
                .count();
            seen.insert(worker.name.clone(), (running, list.items.len()));
        }
        seen
    }

    /// Sets `cluster`'s `lostAfter` and `fenceAfter` (`None` back to the
    /// defaults) and waits until its agent, welcomed again, knows them.
    pub async fn set_fencing(
        &self,
        cluster: &str,
        lost_after: Option<&str>,
        fence_after: Option<&str>,
    ) {
        let welcomes = || {
            self.relay
                .agent_log(cluster)
                .matches("welcomed by the manager")
                .count()
        };
        let before = welcomes();
        let spec = serde_json::json!({"lostAfter": lost_after, "fenceAfter": fence_after});
        self.set_worker_cluster(cluster, spec).await;
        wait::until(
            format!("{cluster}'s agent welcomed again with its fencing"),
            super::WAIT,
            || async {
                match welcomes() > before {
                    true => Seen::Ready(()),
                    false => Seen::Waiting(format!("{before} welcomes")),
                }
            },
        )
        .await
    }

    /// Watches Job `name` (origin UID `uid`) from `cut`, when `cluster` was
    /// cut off, until it is `Complete`.
    pub async fn watch_cut_off(
        &self,
        name: &str,
        uid: &str,
        cluster: &str,
        cut: Instant,
        timeout: Duration,
    ) -> CutOff {
        let clusters: Api<WorkerCluster> = Api::all(kit::client(self.clusters.manager()).await);
        let seen = Mutex::new((Vec::new(), None, None));
        let job = wait::until(
            format!("Job {name} complete after {cluster} was cut off"),
            timeout,
            || async {
                let pods = self.pods_by_worker(uid).await;
                let running: BTreeSet<String> = pods
                    .iter()
                    .filter(|(_, (running, _))| *running > 0)
                    .map(|(worker, _)| worker.clone())
                    .collect();
                let left = pods.get(cluster).map_or(0, |(_, all)| *all);
                let is_lost = clusters
                    .get(cluster)
                    .await
                    .ok()
                    .and_then(|wc| wc.condition("Lost").map(|c| c.status == "True"));
                {
                    let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
                    let (overlaps, pods_gone, lost) = &mut *seen;
                    if running.len() > 1 {
                        overlaps.push(running.clone());
                    }
                    if left == 0 && pods_gone.is_none() {
                        *pods_gone = Some(cut.elapsed());
                    }
                    if is_lost == Some(true) && lost.is_none() {
                        *lost = Some(cut.elapsed());
                    }
                }
                match self.jobs.get(name).await {
                    Ok(job) if has_condition(&job, "Complete") => Seen::Ready(job),
                    Ok(job) => Seen::Waiting(format!(
                        "running on {running:?}, {left} Pod(s) left on {cluster}, status {:?}",
                        job.status
                    )),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await;
        let (overlaps, pods_gone, lost) = seen.into_inner().unwrap_or_else(PoisonError::into_inner);
        CutOff {
            overlaps,
            pods_gone,
            lost,
            job,
        }
    }

    /// Waits until `cluster` shows no Job and no Pod of origin UID `uid`.
    pub async fn wait_nothing_of(&self, cluster: &str, uid: &str) {
        let selector = ListParams::default().labels(&format!("{ORIGIN_UID_LABEL}={uid}"));
        let jobs: Api<Job> = self.worker_api(cluster).await;
        let pods: Api<Pod> = self.worker_api(cluster).await;
        wait::until(
            format!("nothing of {uid} left on {cluster}"),
            super::WAIT,
            || async {
                match (jobs.list(&selector).await, pods.list(&selector).await) {
                    (Ok(j), Ok(p)) if j.items.is_empty() && p.items.is_empty() => Seen::Ready(()),
                    (Ok(j), Ok(p)) => {
                        Seen::Waiting(format!("{} Jobs, {} Pods", j.items.len(), p.items.len()))
                    }
                    (j, p) => Seen::Waiting(format!("{:?} {:?}", j.err(), p.err())),
                }
            },
        )
        .await
    }
}
