//! The status step: N short Jobs, from a worker Job finished to its manager
//! Job showing it, with the manager's own account of where the time went.

use jobrelay_testbed::cluster::ClusterSet;
use jobrelay_testbed::relay::{Relay, metric_in};
use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;

use super::load;
use crate::bench::shared::figures::Figures;
use crate::bench::shared::histogram;
use crate::bench::shared::jobs::{create_relayed, delete_all, suffixed};
use crate::bench::shared::measure::{self, Point, Timestamps, at_once, wait_all};
use crate::log;

/// N short Jobs: from a worker Job finished to its manager Job showing it,
/// and from created to shown finished (the burst); with the manager's
/// account of when it heard each, how long its write took, and when it
/// was shown.
pub(super) async fn status(
    set: &ClusterSet,
    relay: &Relay,
    jobs: &Api<Job>,
    names: &[String],
) -> anyhow::Result<(Figures, Figures, Account)> {
    const HEARD: &str = "jobrelay_status_heard_seconds";
    const WRITE: &str = "jobrelay_status_write_seconds";
    const WRITTEN: &str = "jobrelay_status_seconds";
    const WRITES: &str = "jobrelay_status_writes_total";
    let metrics_before = relay.metrics().await?;
    let names = suffixed(names, "s");
    let on_worker: Timestamps = Default::default();
    let on_manager: Timestamps = Default::default();
    let watches = measure::record_relayed(
        set,
        jobs,
        (Point::Finished, &on_manager),
        (Point::Finished, &on_worker),
    )
    .await?;
    log(&format!("creating {} short manager Jobs", names.len()));
    let created = at_once(&names, create_relayed(jobs, load::SHORT)).await?;
    let on_worker = wait_all("every worker Job finished", &names, &on_worker).await?;
    let on_manager = wait_all("every manager Job shows it", &names, &on_manager).await?;
    let metrics_after = relay.metrics().await?;
    watches.iter().for_each(|w| w.stop());
    delete_all(jobs, &names).await?;
    let account = |name| manager_account(&metrics_before, &metrics_after, name);
    let writes = |text: &str| metric_in(text, WRITES).unwrap_or(0.0);
    let writes = writes(&metrics_after) - writes(&metrics_before);
    Ok((
        Figures::between(&names, &on_worker, &on_manager),
        Figures::between(&names, &created, &on_manager),
        Account {
            heard: account(HEARD),
            write: account(WRITE),
            written: account(WRITTEN),
            writes_per_job: writes / names.len().max(1) as f64,
        },
    ))
}

/// The manager's account of the status step: from each worker Job finished
/// to the manager hearing it, to its write alone, to its Job showing it.
pub(super) struct Account {
    pub heard: histogram::Bounds,
    pub write: histogram::Bounds,
    pub written: histogram::Bounds,
    /// Status writes the manager made per Job, from created to finished.
    pub writes_per_job: f64,
}

/// What the manager's histogram `name` counted between two readings of its
/// metrics.
pub(super) fn manager_account(before: &str, after: &str, name: &str) -> histogram::Bounds {
    histogram::between(
        &histogram::buckets(before, name),
        &histogram::buckets(after, name),
    )
}
