//! The measuring instruments of the bench: watches that note when each Job
//! reached a point, and a tight concurrent client.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use jobrelay_testbed::go::controlplane::seconds;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

use crate::log;

/// Requests in flight at once when creating or deleting.
pub const CONCURRENCY: usize = 32;

/// When each object (by key) reached the point a [`record`] watches for.
pub type Timestamps = Arc<Mutex<HashMap<String, Instant>>>;

/// What a watch notes about an object.
#[derive(Clone, Copy)]
pub enum Point {
    /// First seen.
    Seen,
    /// First seen with a `Complete` or `Failed` condition.
    Finished,
    /// Deleted.
    Gone,
}

/// A running watch and whether it has listed everything once.
pub struct Recording {
    task: tokio::task::JoinHandle<()>,
    listed: tokio::sync::watch::Receiver<bool>,
}

impl Recording {
    /// Waits until the watch has listed everything once, so that nothing
    /// done from now on can slip past it.
    pub async fn listed(mut self) -> anyhow::Result<Self> {
        self.listed.wait_for(|listed| *listed).await?;
        Ok(self)
    }

    pub fn stop(&self) {
        self.task.abort();
    }
}

/// A task aborted when this is dropped.
pub struct Aborted(pub tokio::task::JoinHandle<()>);

impl Drop for Aborted {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs a watch on `api`, handing every event with the time it arrived to
/// `note`, until stopped.
pub fn recording<K>(
    api: Api<K>,
    mut note: impl FnMut(watcher::Event<K>, Instant) + Send + 'static,
) -> Recording
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    let (listed_tx, listed) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(async move {
        let events = watcher(api, watcher::Config::default()).default_backoff();
        let _ = events
            .try_for_each(|event| {
                let now = Instant::now();
                if let watcher::Event::InitDone = event {
                    listed_tx.send_replace(true);
                }
                note(event, now);
                futures::future::ready(Ok(()))
            })
            .await;
    });
    Recording { task, listed }
}

/// Notes, for every Job of `api`, when it reached `point`, until stopped.
pub fn record(api: Api<Job>, point: Point, seen: Timestamps) -> Recording {
    recording(api, move |event, now| {
        let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        match (point, event) {
            (Point::Seen, watcher::Event::Apply(job) | watcher::Event::InitApply(job)) => {
                seen.entry(job.name_any()).or_insert(now);
            }
            (Point::Finished, watcher::Event::Apply(job) | watcher::Event::InitApply(job))
                if finished(&job) =>
            {
                seen.entry(job.name_any()).or_insert(now);
            }
            (Point::Gone, watcher::Event::Delete(job)) => {
                seen.entry(job.name_any()).or_insert(now);
            }
            _ => {}
        }
    })
}

/// Records `manager_point` of the manager Jobs in `jobs` and `worker_point`
/// of the Jobs in the same namespace on every worker, listed already.
pub async fn record_relayed(
    set: &jobrelay_testbed::cluster::ClusterSet,
    jobs: &Api<Job>,
    (manager_point, on_manager): (Point, &Timestamps),
    (worker_point, on_workers): (Point, &Timestamps),
) -> anyhow::Result<Vec<Recording>> {
    let ns = jobs.namespace().unwrap_or_default();
    let mut watches = vec![
        record(jobs.clone(), manager_point, on_manager.clone())
            .listed()
            .await?,
    ];
    for w in set.workers() {
        let on_worker = Api::namespaced(w.client().await?, ns);
        watches.push(
            record(on_worker, worker_point, on_workers.clone())
                .listed()
                .await?,
        );
    }
    Ok(watches)
}

fn finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}

/// Runs `call` for every name, [`CONCURRENCY`] at a time; returns when each
/// call was issued.
pub async fn at_once<F, Fut>(names: &[String], call: F) -> anyhow::Result<HashMap<String, Instant>>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    issue(
        futures::stream::iter(names.iter().cloned()),
        CONCURRENCY,
        call,
    )
    .await
}

/// Runs `call` for every name, `per_second` of them a second whatever the
/// answers take (an offered load); returns when each call was issued.
pub async fn paced<F, Fut>(
    names: &[String],
    per_second: f64,
    call: F,
) -> anyhow::Result<HashMap<String, Instant>>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let every = Duration::from_secs_f64(1.0 / per_second.max(0.01));
    let start = tokio::time::Instant::now();
    let due = futures::stream::iter(names.iter().cloned().zip(0u32..)).then(
        move |(name, i)| async move {
            tokio::time::sleep_until(start + every * i).await;
            name
        },
    );
    // Enough in flight that a slow answer never holds back the next call.
    issue(due, CONCURRENCY * 16, call).await
}

/// Runs `call` for each name as `names` yields it, at most `in_flight` at a
/// time; returns when each call was issued.
async fn issue<F, Fut>(
    names: impl futures::Stream<Item = String>,
    in_flight: usize,
    call: F,
) -> anyhow::Result<HashMap<String, Instant>>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let issued = names
        .map(|name| {
            let started = Instant::now();
            let call = call(name.clone());
            async move { call.await.map(|()| (name, started)) }
        })
        .buffer_unordered(in_flight)
        .try_collect::<HashMap<_, _>>()
        .await?;
    Ok(issued)
}

/// Waits until every name was noted in `seen`; returns the notes.
pub async fn wait_all(
    what: &str,
    names: &[String],
    seen: &Timestamps,
) -> anyhow::Result<HashMap<String, Instant>> {
    let timeout = Duration::from_secs(120 + names.len() as u64 / 4);
    wait_all_within(what, names, seen, timeout).await
}

/// [`wait_all`], giving up after `timeout`.
pub async fn wait_all_within(
    what: &str,
    names: &[String],
    seen: &Timestamps,
    timeout: Duration,
) -> anyhow::Result<HashMap<String, Instant>> {
    let started = Instant::now();
    let result = wait::try_until(what, timeout, || {
        let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let missing = names.iter().filter(|n| !seen.contains_key(*n)).count();
        async move {
            if missing == 0 {
                Seen::Ready(seen)
            } else {
                Seen::Waiting(format!("{missing} missing"))
            }
        }
    })
    .await?;
    log(&format!("{what} after {}", seconds(started.elapsed())));
    Ok(result)
}
