//! Two shapes of load beside the raw run: a burst of N short Jobs until the
//! last one is finished (straight on a worker, and through jobrelay in the
//! status step), and Jobs offered at a steady rate below what a worker can
//! run, where dispatch should add next to nothing.

use std::collections::HashMap;
use std::time::Instant;

use jobrelay_testbed::cluster::ClusterSet;
use jobrelay_testbed::objects::fixtures::TestJob;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};

use crate::bench::shared::figures::Figures;
use crate::bench::shared::jobs::{create_relayed, delete_all};
use crate::bench::shared::measure::{self, Point, Timestamps, at_once, paced, wait_all};
use crate::log;

/// How long each Job of a burst runs.
pub const SHORT: &str = "2s";

/// The share of the raw run's rate offered in the offered-load step.
pub const OFFERED_SHARE: f64 = 0.8;

/// N short Jobs created at once straight on a worker until each is finished
/// there: the time a burst takes without jobrelay.
pub async fn raw_burst(worker: &Api<Job>, ns: &str, names: &[String]) -> anyhow::Result<Figures> {
    let finished: Timestamps = Default::default();
    let watch = measure::record(worker.clone(), Point::Finished, finished.clone())
        .listed()
        .await?;
    log(&format!("creating {} short Jobs on a worker", names.len()));
    let created = at_once(names, |name| {
        let (jobs, job) = (
            worker.clone(),
            TestJob::new(ns, &name).run_for(SHORT).build(),
        );
        async move { jobs.create(&PostParams::default(), &job).await.map(|_| ()) }
    })
    .await?;
    let finished = wait_all("every raw short Job finished", names, &finished).await?;
    watch.stop();
    delete_all(worker, names).await?;
    Ok(Figures::between(names, &created, &finished))
}

/// Manager Jobs created `per_second` at a time, each until its mirror is seen
/// on a worker; then deleted, and waited for until released.
pub async fn offered(
    set: &ClusterSet,
    jobs: &Api<Job>,
    names: &[String],
    per_second: f64,
) -> anyhow::Result<Figures> {
    let mirrored: Timestamps = Default::default();
    let released: Timestamps = Default::default();
    let watches = measure::record_relayed(
        set,
        jobs,
        (Point::Gone, &released),
        (Point::Seen, &mirrored),
    )
    .await?;
    log(&format!(
        "offering {} manager Jobs at {per_second:.1}/s",
        names.len()
    ));
    let created: HashMap<String, Instant> =
        paced(names, per_second, create_relayed(jobs, "1h")).await?;
    let mirrored = wait_all("every offered Job's mirror on its worker", names, &mirrored).await?;
    delete_all(jobs, names).await?;
    wait_all("every offered Job released and gone", names, &released).await?;
    watches.iter().for_each(|w| w.stop());
    Ok(Figures::between(names, &created, &mirrored))
}
