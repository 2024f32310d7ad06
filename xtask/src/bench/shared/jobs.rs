//! The bench's Jobs: creating them (relayed or not), deleting them, and
//! noting when their Pods ran or went.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jobrelay_proto::wire::MANAGED_BY;
use jobrelay_testbed::cluster::ClusterSet;
use jobrelay_testbed::objects::fixtures::TestJob;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use super::figures::rate;
use super::measure::{self, Point, Timestamps, at_once, wait_all};
use crate::log;

/// `names`, each with `-suffix`: the Jobs of another step.
pub(crate) fn suffixed(names: &[String], suffix: &str) -> Vec<String> {
    names.iter().map(|n| format!("{n}-{suffix}")).collect()
}

/// A call (for [`at_once`] or [`measure::paced`]) that creates the named
/// manager Job in `jobs`' namespace, relayed, its Pod running `run_for`.
pub(crate) fn create_relayed(
    jobs: &Api<Job>,
    run_for: &str,
) -> impl Fn(String) -> futures::future::BoxFuture<'static, Result<(), kube::Error>> {
    let (jobs, run_for) = (jobs.clone(), run_for.to_string());
    let ns = jobs.namespace().unwrap_or_default().to_string();
    move |name| {
        let (jobs, job) = (jobs.clone(), relayed(&ns, &name, &run_for));
        Box::pin(async move { jobs.create(&PostParams::default(), &job).await.map(|_| ()) })
    }
}

/// A manager Job that jobrelay relays, its Pod running `run_for`.
pub(crate) fn relayed(ns: &str, name: &str, run_for: &str) -> Job {
    TestJob::new(ns, name)
        .managed_by(MANAGED_BY)
        .run_for(run_for)
        .build()
}

/// Creates a Job per name at once; returns Jobs per second, and when each
/// create was issued.
pub(crate) async fn create_rate(
    api: &Api<Job>,
    names: &[String],
    job: impl Fn(&str) -> Job,
) -> anyhow::Result<(f64, HashMap<String, Instant>)> {
    let started = Instant::now();
    let issued = at_once(names, |name| {
        let (api, job) = (api.clone(), job(&name));
        async move { api.create(&PostParams::default(), &job).await.map(|_| ()) }
    })
    .await?;
    let rate = rate(names.len(), started.elapsed());
    log(&format!("{} Jobs created at {rate:.0}/s", names.len()));
    Ok((rate, issued))
}

/// Deletes every named Job at once with Background propagation (one gone
/// already, e.g. by retention, counts as deleted); returns when each delete
/// was issued.
pub(crate) async fn delete_all(
    api: &Api<Job>,
    names: &[String],
) -> anyhow::Result<HashMap<String, Instant>> {
    at_once(names, |name| {
        let api = api.clone();
        async move {
            match api.delete(&name, &DeleteParams::background()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e),
            }
        }
    })
    .await
}

/// Deletes every named Job at once with Background propagation, as
/// [`delete_all`]; when each delete was issued, and when its Job and its
/// Pod were both gone.
pub(crate) async fn cleanup_until_gone(
    jobs: &Api<Job>,
    pods: &Api<Pod>,
    names: &[String],
) -> anyhow::Result<(HashMap<String, Instant>, HashMap<String, Instant>)> {
    let job_gone: Timestamps = Default::default();
    let pod_gone: Timestamps = Default::default();
    let watches = [
        measure::record(jobs.clone(), Point::Gone, job_gone.clone())
            .listed()
            .await?,
        record_pods(pods.clone(), PodPoint::Gone, pod_gone.clone())
            .listed()
            .await?,
    ];
    let deleted = delete_all(jobs, names).await?;
    let job_gone = wait_all("Jobs gone", names, &job_gone).await?;
    let pod_gone = wait_all("Pods gone", names, &pod_gone).await?;
    watches.iter().for_each(|w| w.stop());
    let done = names
        .iter()
        .filter_map(|n| Some((n.clone(), *job_gone.get(n)?.max(pod_gone.get(n)?))))
        .collect();
    Ok((deleted, done))
}

/// Jobs and Pods deleted in one step, whose garbage collection is still
/// under way, would share the cores with what the next step measures.
/// Waits up to `timeout` until none is left in `jobs` and `pods`; returns
/// how many Jobs and Pods are left then (none, unless it timed out).
pub(crate) async fn left_after(
    timeout: Duration,
    jobs: &[Api<Job>],
    pods: &[Api<Pod>],
) -> (usize, usize) {
    let settled = wait::try_until("no Job and no Pod left", timeout, || async {
        match any_left(jobs).await || any_left(pods).await {
            false => Seen::Ready(()),
            true => Seen::Waiting("some left".into()),
        }
    })
    .await;
    match settled {
        Ok(()) => (0, 0),
        Err(_) => (count_all(jobs).await, count_all(pods).await),
    }
}

/// [`left_after`] `within` for a step, in `ns` on every cluster of `set`:
/// it is an error if anything is left.
pub(crate) async fn settled(set: &ClusterSet, ns: &str, within: Duration) -> anyhow::Result<()> {
    let (mut jobs, mut pods) = (Vec::new(), Vec::new());
    for cluster in &set.clusters {
        let client = cluster.client().await?;
        jobs.push(Api::<Job>::namespaced(client.clone(), ns));
        pods.push(Api::<Pod>::namespaced(client, ns));
    }
    match left_after(within, &jobs, &pods).await {
        (0, 0) => Ok(()),
        (jobs, pods) => anyhow::bail!(
            "{jobs} Jobs and {pods} Pods still left in namespace {ns} {} s after a step deleted them",
            within.as_secs()
        ),
    }
}

/// How long a step's deleted Jobs and Pods may take to be gone, where
/// jobrelay or the raw run deleted them.
pub(crate) const SETTLE: Duration = Duration::from_secs(120);

/// Whether any of `apis` lists an object (an unanswered list counts one).
async fn any_left<K>(apis: &[Api<K>]) -> bool
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    for api in apis {
        match api.list_metadata(&ListParams::default().limit(1)).await {
            Ok(list) if list.items.is_empty() => {}
            _ => return true,
        }
    }
    false
}

/// Objects listed through all of `apis` (an unanswered list counts none).
async fn count_all<K>(apis: &[Api<K>]) -> usize
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let mut count = 0;
    for api in apis {
        count += api
            .list_metadata(&ListParams::default())
            .await
            .map(|l| l.items.len())
            .unwrap_or(0);
    }
    count
}

/// What a Pod watch notes.
#[derive(Clone, Copy)]
pub(crate) enum PodPoint {
    Running,
    Gone,
}

/// Notes when the Pod of each Job (by its `job-name` label) first ran, or
/// was gone.
pub(crate) fn record_pods(pods: Api<Pod>, point: PodPoint, seen: Timestamps) -> measure::Recording {
    use kube::runtime::watcher::Event;
    measure::recording(pods, move |event, now| {
        let pod = match (point, event) {
            (PodPoint::Gone, Event::Delete(pod)) => pod,
            (PodPoint::Running, Event::Apply(pod) | Event::InitApply(pod))
                if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") =>
            {
                pod
            }
            _ => return,
        };
        if let Some(job) = pod.metadata.labels.as_ref().and_then(|l| l.get("job-name")) {
            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.entry(job.clone()).or_insert(now);
        }
    })
}
