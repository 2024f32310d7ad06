//! Dispatch beside a retention backlog: thousands of finished manager Jobs
//! whose `managerAfterFinished` ran out long ago are deleted at the pace of
//! `deletionsPerSecond` while N new Jobs are dispatched. Expiry must not take
//! the reconciles dispatch needs, so dispatch here is set beside the plain
//! dispatch of the same run.

use std::time::Instant;

use jobrelay_proto::wire::MANAGED_BY;
use jobrelay_testbed::cluster::ClusterSet;
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::fixtures::{TestJob, succeeded_status};
use jobrelay_testbed::relay::Relay;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::{Timestamp, ToSpan};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde::Serialize;

use crate::bench::shared::figures::Figures;
use crate::bench::shared::jobs::{create_relayed, delete_all};
use crate::bench::shared::measure::{self, Point, Timestamps, at_once, wait_all};
use crate::log;

/// The manager configuration the bench runs with: finished Jobs expire one
/// second after they finished, at the default pace.
pub const MANAGER_CONFIG: &str = "retention:\n  managerAfterFinished: 1s\n";

/// Finished manager Jobs waiting for deletion during the measure.
pub const BACKLOG: usize = 5_000;

#[derive(Debug, Serialize)]
pub struct Backlog {
    /// Expired Jobs present when dispatch began.
    pub expired_at_start: usize,
    /// Of those, still there when every mirror existed.
    pub expired_left_after: usize,
    pub dispatch: Figures,
}

/// Creates the backlog (Jobs that finished two hours ago), then dispatches
/// `n` Jobs while the manager works it off.
pub async fn dispatch_beside(set: &ClusterSet, relay: &Relay, n: usize) -> anyhow::Result<Backlog> {
    let manager = set.manager().client().await?;
    let backlog_ns = format!("bench-backlog-{n}");
    let ns = format!("bench-beside-backlog-{n}");
    kit::create_namespace(&manager, &backlog_ns).await;
    for cluster in &set.clusters {
        kit::create_namespace(&cluster.client().await?, &ns).await;
    }
    let expired: Api<Job> = Api::namespaced(manager.clone(), &backlog_ns);
    let old: Vec<String> = (0..BACKLOG).map(|i| format!("old-{i}")).collect();
    log(&format!(
        "creating a backlog of {BACKLOG} finished manager Jobs"
    ));
    // Created suspended, so nothing is dispatched before they read finished.
    at_once(&old, |name| {
        let (expired, job) = (
            expired.clone(),
            TestJob::new(&backlog_ns, &name)
                .managed_by(MANAGED_BY)
                .suspended()
                .build(),
        );
        async move {
            expired
                .create(&PostParams::default(), &job)
                .await
                .map(|_| ())
        }
    })
    .await?;
    let (started, finished) = (Timestamp::now() - 3.hours(), Timestamp::now() - 2.hours());
    let status = succeeded_status(started, finished);
    let deleted_before = relay
        .metric("jobrelay_retention_deleted_total")
        .await?
        .unwrap_or(0.0);
    at_once(&old, |name| {
        let (expired, status) = (expired.clone(), status.clone());
        async move {
            match expired
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
            {
                Ok(_) => Ok(()),
                // Deleted by retention as soon as it read finished.
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                Err(e) => Err(e),
            }
        }
    })
    .await?;
    let left = |api: Api<Job>| async move {
        api.list_metadata(&ListParams::default())
            .await
            .map(|l| l.items.len())
    };
    let expired_at_start = left(expired.clone()).await?;
    let deleted = relay
        .metric("jobrelay_retention_deleted_total")
        .await?
        .unwrap_or(0.0)
        - deleted_before;
    log(&format!(
        "{expired_at_start} expired Jobs wait for deletion ({deleted:.0} deleted while the backlog was made)"
    ));

    let jobs: Api<Job> = Api::namespaced(manager, &ns);
    let mirrored: Timestamps = Default::default();
    let mut watches = Vec::new();
    for w in set.workers() {
        watches.push(
            measure::record(
                Api::namespaced(w.client().await?, &ns),
                Point::Seen,
                mirrored.clone(),
            )
            .listed()
            .await?,
        );
    }
    let names: Vec<String> = (0..n).map(|i| format!("beside-{i}")).collect();
    log(&format!("creating {n} manager Jobs beside the backlog"));
    let began = Instant::now();
    let created = at_once(&names, create_relayed(&jobs, "1h")).await?;
    let mirrored = wait_all(
        "every mirror beside the backlog on its worker",
        &names,
        &mirrored,
    )
    .await?;
    let dispatch = Figures::between(&names, &created, &mirrored);
    let expired_left_after = left(expired).await?;
    log(&format!(
        "dispatched {n} in {:.1} s; {expired_left_after} expired Jobs still waiting",
        began.elapsed().as_secs_f64()
    ));
    watches.iter().for_each(|w| w.stop());

    let released: Timestamps = Default::default();
    let gone = measure::record(jobs.clone(), Point::Gone, released.clone())
        .listed()
        .await?;
    delete_all(&jobs, &names).await?;
    wait_all(
        "every Job beside the backlog released and gone",
        &names,
        &released,
    )
    .await?;
    gone.stop();
    // What is left of the backlog goes with its namespace.
    let namespaces: Api<Namespace> = Api::all(set.manager().client().await?);
    namespaces
        .delete(&backlog_ns, &DeleteParams::background())
        .await?;
    Ok(Backlog {
        expired_at_start,
        expired_left_after,
        dispatch,
    })
}
