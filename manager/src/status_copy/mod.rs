//! Copying what a worker reports onto the manager Job's status.
//!
//! It runs beside the controller in `reconcile`, over the same Job cache and
//! triggers, so a Job that finished on its worker is shown finished at once,
//! even while a wave of new Jobs queues up for dispatch there; and on a queue
//! of its own ([`StatusQueue`]) that copies finished Jobs first. It alone
//! copies the status of an active or suspended Job; the reconcile in
//! `reconcile.rs` writes status only to show a lost, refused or withdrawn
//! mirror.

pub mod queue;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::{Stream, StreamExt};
use jobrelay_process::shutdown::Shutdown;
use kube::runtime::reflector::Store;
use kube::runtime::scheduler::{ScheduleRequest, scheduler};
use tokio::sync::{Notify, mpsc};
use tokio_stream::wrappers::UnboundedReceiverStream;

use k8s_openapi::jiff::Timestamp;

use jobrelay_proto::v1::MirrorPhase;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use tracing::instrument;

use crate::controller::context::{Context, Error, retry_in};
use crate::controller::writes;
use crate::job::life::RESYNC;
use crate::job::lifecycle::{Lifecycle, has_finalizer, is_relayed, lifecycle};
use crate::job::placement::assigned_cluster;
use crate::job::pods_why;
use crate::job::retention::deactivated_at;
use crate::kinds::Key;
use crate::kinds::RelayedKind;
use crate::mirror::Held;
use crate::status_copy::queue::{Lane, StatusQueue};
use jobrelay_proto::wire::PODS_ANNOTATION;

/// The status copy: `workers` copies at once, at most half of them for Jobs
/// whose mirror has not finished, until `shutdown` (copies under way
/// finish). Looks at a Job when `changed` yields it (its watch) or
/// `triggered` names it (what its agent reported) — a Job whose mirror has
/// not finished [`PROGRESS_HOLD`](queue::PROGRESS_HOLD) later — and when its
/// last copy asked to be looked at again.
pub async fn run<K: RelayedKind>(
    ctx: Arc<Context>,
    jobs: Store<K>,
    changed: impl Stream<Item = Arc<K>> + Send + 'static,
    triggered: mpsc::UnboundedReceiver<ObjectRef<K>>,
    workers: usize,
    shutdown: Shutdown,
) {
    let queue = Arc::new(Queue::new(workers / 2));
    let (again, due) = mpsc::unbounded_channel();
    let (hold, held) = mpsc::unbounded_channel();
    let changes = futures::stream::select(
        changed.map(|job| ObjectRef::from_obj(job.as_ref())),
        UnboundedReceiverStream::new(triggered),
    );
    let holding = {
        let (queue, ctx, jobs) = (Arc::clone(&queue), Arc::clone(&ctx), jobs.clone());
        tokio::spawn(changes.for_each(move |key| {
            let job = jobs.get(&key);
            let lane = lane(job.as_deref(), &ctx);
            let wait = lane.hold(|| shows_new_pods(job.as_deref(), &ctx));
            if wait.is_zero() {
                queue.mark(key, lane);
            } else {
                let run_at = tokio::time::Instant::now() + wait;
                // The earlier of two holds of one Job stands.
                let _ = hold.send(ScheduleRequest {
                    message: key,
                    run_at,
                });
            }
            futures::future::ready(())
        }))
    };
    let due = futures::stream::select(
        scheduler(UnboundedReceiverStream::new(held)),
        scheduler(UnboundedReceiverStream::new(due)),
    );
    let marking = {
        let (queue, ctx, jobs) = (Arc::clone(&queue), Arc::clone(&ctx), jobs.clone());
        tokio::spawn(due.for_each(move |key| {
            let lane = lane(jobs.get(&key).as_deref(), &ctx);
            queue.mark(key, lane);
            futures::future::ready(())
        }))
    };
    let working = (0..workers).map(|_| {
        let (queue, ctx, jobs, again) = (
            Arc::clone(&queue),
            Arc::clone(&ctx),
            jobs.clone(),
            again.clone(),
        );
        let stop = shutdown.clone();
        async move {
            loop {
                let key = tokio::select! {
                    key = queue.next() => key,
                    () = stop.clone().requested() => return,
                };
                let look_again = match jobs.get(&key) {
                    Some(job) => copy(job, &ctx).await,
                    None => None,
                };
                queue.done(&key);
                if let Some(after) = look_again {
                    let run_at = tokio::time::Instant::now() + after;
                    let _ = again.send(ScheduleRequest {
                        message: key,
                        run_at,
                    });
                }
            }
        }
    });
    futures::future::join_all(working).await;
    holding.abort();
    marking.abort();
}

/// The lane of a Job: finished if its mirror's last report says so.
fn lane<K: RelayedKind>(job: Option<&K>, ctx: &Context) -> Lane {
    let finished = job
        .and_then(|job| ctx.fleet.phase(assigned_cluster(job)?, &job.uid()?))
        .is_some_and(|phase| matches!(phase, MirrorPhase::Succeeded | MirrorPhase::Failed));
    if finished {
        Lane::Finished
    } else {
        Lane::Progress
    }
}

/// Whether the Job's worker reports active Pods its status shows none of.
fn shows_new_pods<K: RelayedKind>(job: Option<&K>, ctx: &Context) -> bool {
    // The worker's status is parsed only while the Job shows no Pods active.
    let Some(job) = job.filter(|job| !K::runs_pods(&job.shown())) else {
        return false;
    };
    assigned_cluster(job)
        .zip(job.uid())
        .and_then(|(cluster, uid)| ctx.fleet.view(cluster, &uid))
        .and_then(|view| view.state.status()?.read::<K::Status>())
        .is_some_and(|reported| K::runs_pods(&reported))
}

/// One copy of a Job's status; when to look at it again, if ever.
async fn copy<K: RelayedKind>(job: Arc<K>, ctx: &Arc<Context>) -> Option<Duration> {
    let key = Key::from_obj(job.as_ref());
    match reconcile(job, Arc::clone(ctx)).await {
        Ok(after) => {
            ctx.retries.status_copy.succeeded(&key);
            after
        }
        Err(error) => Some(retry_in(&key, &error, &ctx.retries.status_copy)),
    }
}

/// The [`StatusQueue`] and what wakes a worker waiting on it.
struct Queue<K: RelayedKind> {
    queue: Mutex<StatusQueue<K>>,
    ready: Notify,
}

impl<K: RelayedKind> Queue<K> {
    fn new(progress_limit: usize) -> Self {
        Self {
            queue: Mutex::new(StatusQueue::new(progress_limit)),
            ready: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StatusQueue<K>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn mark(&self, key: ObjectRef<K>, lane: Lane) {
        self.lock().mark(key, lane);
        self.ready.notify_one();
    }

    fn done(&self, key: &ObjectRef<K>) {
        self.lock().done(key);
        self.ready.notify_one();
    }

    /// The next Job to work, once there is one.
    async fn next(&self) -> ObjectRef<K> {
        loop {
            let (next, more) = {
                let mut queue = self.lock();
                (queue.take(), queue.can_take())
            };
            if more {
                // Wake-ups coalesce: pass one on while work can be taken.
                self.ready.notify_one();
            }
            match next {
                Some(key) => return key,
                None => self.ready.notified().await,
            }
        }
    }
}

/// Copies the status the Job's agent last reported onto it, if it shows
/// something else; when to look at it again, if ever.
#[instrument(skip_all, fields(job = %ObjectRef::from_obj(job.as_ref())))]
pub async fn reconcile<K: RelayedKind>(
    job: Arc<K>,
    ctx: Arc<Context>,
) -> Result<Option<Duration>, Error> {
    if !is_relayed(&*job)
        || !matches!(lifecycle(&*job), Lifecycle::Active | Lifecycle::Suspended)
        || !has_finalizer(&*job)
        || deactivated_at(&*job).is_some()
    {
        return Ok(None);
    }
    let (Some(cluster), Some(uid), Some(namespace)) =
        (assigned_cluster(&*job), job.uid(), job.namespace())
    else {
        return Ok(None);
    };
    // A Lost cluster says nothing more: what it reported was copied when it
    // came, and a Job withdrawn from it shows nothing running there.
    if ctx.fleet.is_lost(cluster) {
        return Ok(Some(RESYNC));
    }
    let Some(view) = ctx.fleet.view(cluster, &uid) else {
        return Ok(Some(RESYNC));
    };
    // A mirror being deleted says nothing more about this Job's run.
    if let Some(held) = view.state.held()
        && held.phase != MirrorPhase::Deleting
        && let Some(worker_status) = held
            .status
            .as_ref()
            .and_then(|kept| kept.read::<K::Status>())
    {
        let worker_status = &worker_status;
        let jobs: Api<K> = Api::namespaced(ctx.client.clone(), &namespace);
        show_pods(&jobs, &job, cluster, held, &ctx).await?;
        let finished_at = (!job.is_finished())
            .then(|| K::finish_time(worker_status))
            .flatten();
        let writing = std::time::Instant::now();
        let written = writes::write_status(&jobs, &job, worker_status)
            .await
            .map_err(|source| Error::Kube {
                job: ObjectRef::from_obj(job.as_ref()).to_string(),
                source,
            })?;
        if written.is_some() {
            ctx.metrics.status_written();
        }
        if let Some(at) = finished_at {
            ctx.metrics.status_write(cluster, writing.elapsed());
            let took = Timestamp::now().duration_since(at);
            ctx.metrics
                .status_shown(cluster, Duration::try_from(took).unwrap_or_default());
        }
    }
    Ok(Some(RESYNC))
}

/// Shows on the Job why Pods of its mirror on `cluster` wait or failed, as
/// the agent last said in `held` ([`pods_why`]): its annotation first, then
/// a warning for each reason not shown before — none once the mirror ended.
async fn show_pods<K: RelayedKind>(
    jobs: &Api<K>,
    job: &K,
    cluster: &str,
    held: &Held,
    ctx: &Context,
) -> Result<(), Error> {
    let shown = job.annotations().get(PODS_ANNOTATION).map(String::as_str);
    let ended = matches!(held.phase, MirrorPhase::Succeeded | MirrorPhase::Failed);
    let next = pods_why::shown(cluster, held.pods.as_ref(), shown, ended);
    if let Some(text) = next.annotation {
        writes::annotate(jobs, job, PODS_ANNOTATION, text.as_deref())
            .await
            .map_err(|source| Error::Kube {
                job: ObjectRef::from_obj(job).to_string(),
                source,
            })?;
    }
    let regarding = job.object_ref(&());
    for event in next.events {
        let topic = &event.topic;
        ctx.events
            .publish_on(&regarding, event.reason, topic, event.note);
    }
    Ok(())
}
