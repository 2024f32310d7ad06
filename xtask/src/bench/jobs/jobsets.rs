//! JobSets through jobrelay, beside the same created straight on a worker:
//! N JobSets of a one-Pod leader and three workers — created until all four
//! Pods of each run, then deleted until nothing of them is left. The JobSet
//! controller runs on worker-1 only, so every relayed JobSet goes there and
//! the raw JobSets are made there too.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::wire::MANAGED_BY;
use jobrelay_testbed::cluster::ClusterSet;
use jobrelay_testbed::controllers::jobset::{JOBSET_NAME_LABEL, JobSetController, install_crds};
use jobrelay_testbed::go::jobset_build::ensure_jobset_built;
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::fixtures::{RUN_FOR, pod_spec};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher::Event;
use serde::Serialize;
use serde_json::json;

use crate::bench::shared::figures::{Figures, ratio};
use crate::bench::shared::measure::{self, Timestamps, at_once, wait_all};
use crate::bench::shared::table::row;
use crate::log;

/// The worker that runs the JobSet controller.
const WORKER: &str = "worker-1";
/// Pods of each JobSet.
const PODS: usize = 4;

/// The JobSet row of the bench.
#[derive(Debug, Serialize)]
pub(super) struct Report {
    pub jobsets: usize,
    pub pods_each: usize,
    /// Created straight on worker-1 → all four Pods running.
    pub raw_run: Figures,
    /// Manager JobSets created → all four Pods of the mirror running.
    pub run: Figures,
    pub run_ratio_to_raw: f64,
    /// Deleted straight on worker-1 (Background) → every Pod gone.
    pub raw_cleanup: Figures,
    /// Manager JobSets deleted → released and gone (the mirror, its Jobs
    /// and Pods gone first).
    pub cleanup: Figures,
    pub cleanup_ratio_to_raw: f64,
}

/// The JobSet CRD on the manager and the controller on [`WORKER`]: before
/// jobrelay starts, which reads at start what each cluster serves.
pub(super) async fn prepare(set: &ClusterSet) -> anyhow::Result<JobSetController> {
    let release = ensure_jobset_built(&mut log)?;
    install_crds(&set.manager().client().await?, &release).await?;
    JobSetController::start_on(set, WORKER).await
}

pub(super) async fn bench(set: &ClusterSet, n: usize) -> anyhow::Result<Report> {
    let names: Vec<String> = (0..n).map(|i| format!("set-{i}")).collect();
    let worker = set
        .workers()
        .iter()
        .find(|w| w.name == WORKER)
        .ok_or_else(|| anyhow::anyhow!("no {WORKER}"))?
        .client()
        .await?;

    let raw_ns = format!("bench-jobsets-raw-{n}");
    kit::create_namespace(&worker, &raw_ns).await;
    let raw: Api<JobSet> = Api::namespaced(worker.clone(), &raw_ns);
    let pods = Api::<Pod>::namespaced(worker.clone(), &raw_ns);
    let (running, gone) = (Timestamps::default(), Timestamps::default());
    let watches = [
        record_pods(pods.clone(), true, running.clone())
            .listed()
            .await?,
        record_pods(pods, false, gone.clone()).listed().await?,
    ];
    log(&format!("creating {n} JobSets straight on {WORKER}"));
    let created = at_once(&names, create(&raw, &raw_ns, false)).await?;
    let raw_running = wait_all("every raw JobSet's Pods running", &names, &running).await?;
    let deleted = at_once(&names, delete(&raw)).await?;
    let raw_gone = wait_all("every raw JobSet's Pods gone", &names, &gone).await?;
    watches.iter().for_each(|w| w.stop());
    let raw_run = Figures::between(&names, &created, &raw_running);
    let raw_cleanup = Figures::between(&names, &deleted, &raw_gone);

    let ns = format!("bench-jobsets-{n}");
    for cluster in &set.clusters {
        kit::create_namespace(&cluster.client().await?, &ns).await;
    }
    let manager: Api<JobSet> = Api::namespaced(set.manager().client().await?, &ns);
    let (running, released) = (Timestamps::default(), Timestamps::default());
    let watches = [
        record_pods(Api::namespaced(worker, &ns), true, running.clone())
            .listed()
            .await?,
        record_gone(manager.clone(), released.clone())
            .listed()
            .await?,
    ];
    log(&format!("creating {n} manager JobSets"));
    let created = at_once(&names, create(&manager, &ns, true)).await?;
    let mirrors_running = wait_all("every mirror's Pods running", &names, &running).await?;
    let deleted = at_once(&names, delete(&manager)).await?;
    let released = wait_all("every manager JobSet released and gone", &names, &released).await?;
    watches.iter().for_each(|w| w.stop());
    let run = Figures::between(&names, &created, &mirrors_running);
    let cleanup = Figures::between(&names, &deleted, &released);
    Ok(Report {
        jobsets: n,
        pods_each: PODS,
        run_ratio_to_raw: ratio(run.jobs_per_second, raw_run.jobs_per_second),
        cleanup_ratio_to_raw: ratio(cleanup.jobs_per_second, raw_cleanup.jobs_per_second),
        raw_run,
        run,
        raw_cleanup,
        cleanup,
    })
}

/// Creates JobSet `name` in `namespace`: jobrelay's when `relayed`.
fn create(
    api: &Api<JobSet>,
    namespace: &str,
    relayed: bool,
) -> impl Fn(String) -> futures::future::BoxFuture<'static, Result<(), kube::Error>> {
    let (api, namespace) = (api.clone(), namespace.to_string());
    move |name| {
        let (api, jobset) = (api.clone(), jobset(&name, &namespace, relayed));
        Box::pin(async move {
            let jobset = jobset.map_err(|e| kube::Error::Service(e.into()))?;
            api.create(&PostParams::default(), &jobset)
                .await
                .map(|_| ())
        })
    }
}

fn delete(
    api: &Api<JobSet>,
) -> impl Fn(String) -> futures::future::BoxFuture<'static, Result<(), kube::Error>> {
    let api = api.clone();
    move |name| {
        let api = api.clone();
        Box::pin(async move {
            api.delete(&name, &DeleteParams::background())
                .await
                .map(|_| ())
        })
    }
}

/// A one-Pod leader and three workers, each Pod running an hour.
fn jobset(name: &str, namespace: &str, relayed: bool) -> serde_json::Result<JobSet> {
    let pod = serde_json::to_value(pod_spec())?;
    let replicated = |job: &str, pods: usize| {
        json!({"name": job, "replicas": 1, "template": {"spec": {
            "parallelism": pods, "completions": pods,
            "template": {"metadata": {"annotations": {RUN_FOR: "1h"}}, "spec": pod},
        }}})
    };
    let mut spec =
        json!({"replicatedJobs": [replicated("leader", 1), replicated("workers", PODS - 1)]});
    if relayed {
        spec["managedBy"] = json!(MANAGED_BY);
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }))
}

/// Notes when all [`PODS`] Pods of each JobSet (by its name label) were
/// running, or (not `running`) were gone.
fn record_pods(pods: Api<Pod>, running: bool, seen: Timestamps) -> measure::Recording {
    let mut counted: HashMap<String, HashSet<String>> = HashMap::new();
    measure::recording(pods, move |event, now: Instant| {
        let pod = match (running, event) {
            (false, Event::Delete(pod)) => pod,
            (true, Event::Apply(pod) | Event::InitApply(pod))
                if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") =>
            {
                pod
            }
            _ => return,
        };
        let labels = pod.metadata.labels.as_ref();
        let (Some(set), Some(name)) = (
            labels.and_then(|l| l.get(JOBSET_NAME_LABEL)),
            pod.metadata.name,
        ) else {
            return;
        };
        let pods = counted.entry(set.clone()).or_default();
        pods.insert(name);
        if pods.len() == PODS {
            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.entry(set.clone()).or_insert(now);
        }
    })
}

/// Notes when each manager JobSet was gone.
fn record_gone(jobsets: Api<JobSet>, seen: Timestamps) -> measure::Recording {
    measure::recording(jobsets, move |event, now| {
        if let Event::Delete(jobset) = event
            && let Some(name) = jobset.metadata.name
        {
            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.entry(name).or_insert(now);
        }
    })
}

/// The JobSet rows of the table.
pub(super) fn print(r: &Report) {
    println!();
    println!(
        "JobSets: {} of {} Pods each, on {WORKER} (its JobSet controller)",
        r.jobsets, r.pods_each
    );
    println!(
        "{:<44} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "measure", "sets/s", "p50 ms", "p95 ms", "p99 ms", "max ms"
    );
    row("raw: JobSet created -> its 4 Pods running", &r.raw_run);
    row("dispatch: manager JobSet -> 4 Pods running", &r.run);
    println!("{:<44} {:>9.2}", "  ratio to raw", r.run_ratio_to_raw);
    row("raw cleanup: Background delete, Pods gone", &r.raw_cleanup);
    row("cleanup: delete manager JobSet -> released", &r.cleanup);
    println!("{:<44} {:>9.2}", "  ratio to raw", r.cleanup_ratio_to_raw);
}
