//! The leader's controllers: Kueue's admission check (once Kueue is
//! found), the Job controller that acts on mirrors, and the status copy.
//! Both Job controllers see every Job change (their own subscriptions) and
//! every trigger of the fleet (what agents report), so a status never waits
//! behind a queue of Jobs to dispatch; the admission check is woken for Jobs
//! whose Workload waits on it.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use jobrelay_process::{Shutdown, Tasks};
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::{Controller, controller};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::watches::{Inputs, KindWatch};
use crate::controller::context::Context;
use crate::controller::reconcile::{self, Dispatched};
use crate::kinds::stores::Stores;
use crate::{kueue, status_copy};
use jobrelay_kinds::jobset::JobSet;
use kube::runtime::reflector::ObjectRef;

/// Reconciles running at once.
const CONCURRENCY: u16 = 32;
/// Status copies running at once (half of them at most for Jobs that have
/// not finished).
const STATUS_CONCURRENCY: usize = 16;

/// Starts the admission check and the trigger fan-out among `tasks`;
/// returns the two Job controllers, which end once both stopped (on
/// shutdown).
pub(super) fn start(
    ctx: Arc<Context>,
    inputs: Inputs,
    shutdown: &Shutdown,
    tasks: &Tasks,
) -> BoxFuture<'static, ()> {
    let (to_workloads, for_workloads) = mpsc::unbounded_channel();
    let (stores, writers) = kueue::discovery::stores();
    let admission = kueue::controller::Context {
        client: ctx.client.clone(),
        checks: stores.checks,
        flavors: stores.flavors,
        sets: stores.sets,
        cluster_queues: stores.cluster_queues,
        local_queues: stores.local_queues,
        stores: Stores {
            jobs: inputs.jobs.objects.clone(),
            jobsets: inputs.jobsets.as_ref().map(|w| w.objects.clone()),
        },
        registry: ctx.registry.clone(),
        fleet: Arc::clone(&ctx.fleet),
        reservations: Arc::clone(&ctx.reservations),
        answers: Default::default(),
        triggers: inputs.triggers,
        events: ctx.events.clone(),
        avoid_after_pods_not_ready: ctx.config.kueue.avoid_after_pods_not_ready,
    };
    tasks.spawn_to_end(kueue::discovery::run_when_installed(
        admission,
        writers,
        shutdown.clone(),
        for_workloads,
        tasks.clone(),
    ));
    let (to_jobs, for_jobs) = mpsc::unbounded_channel();
    let (to_jobsets, for_jobsets) = mpsc::unbounded_channel();
    let waiting = Arc::clone(&ctx.reservations);
    let mut triggered = inputs.triggered;
    tasks.spawn(async move {
        while let Some(key) = triggered.recv().await {
            if let Some(workload) = waiting.workload_of(&key) {
                let _ = to_workloads.send(workload);
            }
            if let Some(job) = key.typed::<Job>() {
                let _ = to_jobs.send(job);
            } else if let Some(jobset) = key.typed::<JobSet>() {
                let _ = to_jobsets.send(jobset);
            }
        }
    });
    let mut running = vec![pair(inputs.jobs, for_jobs, &ctx, shutdown, tasks)];
    if let Some(watch) = inputs.jobsets {
        running.push(pair(watch, for_jobsets, &ctx, shutdown, tasks));
    }
    Box::pin(async move {
        futures::future::join_all(running).await;
    })
}

/// One kind's two controllers: the mirror controller ([`reconcile`]) and
/// the status copy ([`status_copy`]), each woken by the kind's changes and
/// by what agents report of its mirrors (`triggered`).
fn pair<K: Dispatched>(
    watch: KindWatch<K>,
    mut triggered: mpsc::UnboundedReceiver<ObjectRef<K>>,
    ctx: &Arc<Context>,
    shutdown: &Shutdown,
    tasks: &Tasks,
) -> BoxFuture<'static, ()> {
    let (to_mirrors, for_mirrors) = mpsc::unbounded_channel();
    let (to_status, for_status) = mpsc::unbounded_channel();
    tasks.spawn(async move {
        while let Some(key) = triggered.recv().await {
            let _ = to_status.send(key.clone());
            let _ = to_mirrors.send(key);
        }
    });
    let mirrors = Controller::for_shared_stream(watch.mirror_changes, watch.objects.clone())
        .with_config(controller::Config::default().concurrency(CONCURRENCY))
        .reconcile_on(UnboundedReceiverStream::new(for_mirrors))
        .graceful_shutdown_on(shutdown.clone().requested())
        .run(
            reconcile::reconcile::<K>,
            reconcile::error_policy::<K>,
            Arc::clone(ctx),
        )
        .for_each(|_| futures::future::ready(()));
    let status = status_copy::run(
        Arc::clone(ctx),
        watch.objects,
        watch.status_changes,
        for_status,
        STATUS_CONCURRENCY,
        shutdown.clone(),
    );
    Box::pin(async move {
        futures::future::join(mirrors, status).await;
    })
}
