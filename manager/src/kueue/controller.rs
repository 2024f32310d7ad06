//! The thin side of the admission check: watches Kueue's Workloads and
//! AdmissionChecks, asks [`check`](super::check) what to do, and writes the
//! answer — the check's state on a Workload, the `Active` condition of an
//! AdmissionCheck — with server-side apply. Placing the Job and applying its
//! mirror are the Job controller's work: this side only records a
//! [`Reservation`] and wakes it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jobrelay_process::Shutdown;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, controller, watcher};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::{debug, info, instrument, warn};

use super::check::{self, CheckState, CheckStep};
use super::check_write::{Answer, apply_status, check_api_version};
pub use super::context::{Context, Error};
use super::types::{AdmissionCheck, Listed, Workload};
pub use super::workload_view::is_queued;
use super::workload_view::{Owned, View, allowed};
use super::{CONTROLLER_NAME, Reservation};
use crate::condition::Assessment;
use crate::job::withdrawal::Withdrawal;
use crate::telemetry::events::Reason;

/// How often an AdmissionCheck's `Active` condition is looked at again, so
/// that it follows agents connecting and leaving.
const ACTIVE_RESYNC: Duration = Duration::from_secs(5);
/// Workloads reconciled at once.
const CONCURRENCY: u16 = 16;

/// Runs the Workload and AdmissionCheck controllers until shutdown;
/// `woken` names Workloads whose Job or mirror changed.
pub(super) async fn run(
    ctx: Context,
    shutdown: Shutdown,
    woken: mpsc::UnboundedReceiver<ObjectRef<Workload>>,
) {
    // A Workload looked at before the caches listed would look like none of
    // jobrelay's business, and not be looked at again until it changes.
    let listed = futures::future::try_join5(
        ctx.checks.wait_until_ready(),
        ctx.flavors.wait_until_ready(),
        ctx.stores.jobs.wait_until_ready(),
        ctx.cluster_queues.wait_until_ready(),
        ctx.local_queues.wait_until_ready(),
    );
    if listed.await.is_err() {
        return;
    }
    if let Some(jobsets) = &ctx.stores.jobsets
        && jobsets.wait_until_ready().await.is_err()
    {
        return;
    }
    let ctx = Arc::new(ctx);
    let checks = Controller::new(
        Api::<AdmissionCheck>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .graceful_shutdown_on(shutdown.clone().requested())
    .run(reconcile_check, error_policy, Arc::clone(&ctx))
    .for_each(|_| futures::future::ready(()));
    let workloads = Controller::new(
        Api::<Workload>::all(ctx.client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .with_config(controller::Config::default().concurrency(CONCURRENCY))
    .reconcile_on(tokio_stream::wrappers::UnboundedReceiverStream::new(woken))
    .graceful_shutdown_on(shutdown.requested())
    .run(reconcile_workload, error_policy, ctx)
    .for_each(|_| futures::future::ready(()));
    futures::future::join(checks, workloads).await;
}

fn error_policy<K>(_: Arc<K>, error: &Error, _: Arc<Context>) -> Action {
    warn!(%error, "admission check reconcile failed; retrying");
    Action::requeue(Duration::from_secs(2))
}

/// Keeps a jobrelay AdmissionCheck's `Active` condition true to life.
#[instrument(skip_all, fields(check = %check.name_any()))]
async fn reconcile_check(check: Arc<AdmissionCheck>, ctx: Arc<Context>) -> Result<Action, Error> {
    if check.spec.controller_name != CONTROLLER_NAME {
        return Ok(Action::await_change());
    }
    let allowed = allowed(&check, &ctx.sets);
    let reach = reach(&check.name_any(), &ctx);
    let assessment = check::active(&allowed, &reach, |cluster, namespace| {
        ctx.registry.admits(cluster, namespace).is_ok()
    });
    let status = assessment.status();
    let Assessment {
        holds: active,
        reason,
        message,
    } = assessment;
    let shown = check
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .find(|c| c.type_ == "Active");
    if shown.is_some_and(|c| {
        c.status == status
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(&message)
    }) {
        return Ok(Action::requeue(ACTIVE_RESYNC));
    }
    info!(active, reason, %message, "AdmissionCheck Active");
    let body = json!({
        "apiVersion": check_api_version(),
        "kind": "AdmissionCheck",
        "metadata": {"name": check.name_any()},
        "status": {"conditions": [{
            "type": "Active", "status": status, "reason": reason, "message": message,
            "lastTransitionTime": Timestamp::now().to_string(),
            "observedGeneration": check.metadata.generation.unwrap_or(0),
        }]},
    });
    let api: Api<AdmissionCheck> = Api::all(ctx.client.clone());
    let name = check.name_any();
    apply_status(&api, &name, body, || {
        format!("AdmissionCheck {name}: writing status.conditions[Active]")
    })
    .await?;
    Ok(Action::requeue(ACTIVE_RESYNC))
}

/// What the caches show of the clusters check `name` could use and of the
/// queues that list it.
fn reach(name: &str, ctx: &Context) -> check::Reach {
    let mut reach = check::Reach {
        registered: ctx
            .registry
            .clusters
            .state()
            .iter()
            .map(|c| c.name_any())
            .collect(),
        connected: ctx.fleet.candidates().into_iter().map(|c| c.name).collect(),
        ..check::Reach::default()
    };
    let mut listing = BTreeSet::new();
    for queue in ctx.cluster_queues.state() {
        match queue.lists(name) {
            None => continue,
            Some(Listed::OnSomeFlavors) => {
                reach.per_flavor.insert(queue.name_any());
            }
            Some(Listed::OnEveryFlavor) => {}
        }
        listing.insert(queue.name_any());
    }
    reach.namespaces = ctx
        .local_queues
        .state()
        .iter()
        .filter(|q| listing.contains(&q.spec.cluster_queue))
        .filter_map(|q| q.namespace())
        .filter(|namespace| ctx.registry.knows_namespace(namespace))
        .collect();
    reach
}

/// Answers jobrelay's check on one Workload.
#[instrument(skip_all, fields(workload = %ObjectRef::from_obj(workload.as_ref())))]
async fn reconcile_workload(workload: Arc<Workload>, ctx: Arc<Context>) -> Result<Action, Error> {
    let Some(View {
        names,
        input,
        job,
        job_uid,
        scheduling,
    }) = View::of(&workload, &ctx)
    else {
        return Ok(Action::await_change());
    };
    let answer = Answer {
        workload: &workload,
        checks: &names,
        ctx: &ctx,
    };
    let step = check::decide(&input);
    debug!(?step, "admission check");
    if let Some(owned) = &job {
        let watched =
            check::watches_mirror(&input, &step).then(|| ObjectRef::from_obj(workload.as_ref()));
        ctx.reservations.admitted(&owned.key, watched);
    }
    match step {
        CheckStep::Idle => {
            ctx.reservations.release(&job_uid);
            ctx.answers.forget(&workload.uid().unwrap_or_default());
            Ok(Action::await_change())
        }
        CheckStep::Wait(after) => Ok(Action::requeue(after)),
        CheckStep::Pending { message, after } => {
            if !answer.shown(CheckState::Pending, &message) {
                answer.write(CheckState::Pending, &message, None).await?;
            }
            Ok(Action::requeue(after))
        }
        CheckStep::Admitted(after) => {
            ctx.reservations.release(&job_uid);
            ctx.answers.forget(&workload.uid().unwrap_or_default());
            Ok(Action::requeue(after))
        }
        CheckStep::Reserve(after) => {
            let scheduling = match scheduling {
                Ok(scheduling) => scheduling,
                Err(why) => {
                    debug!(%why, "waiting for the flavor cache");
                    return Ok(Action::requeue(after));
                }
            };
            if let Some(job) = &job
                && let Ok(allowed) = input.allowed
            {
                let reservation = Reservation {
                    job: job.key.clone(),
                    workload: ObjectRef::from_obj(workload.as_ref()),
                    allowed,
                    scheduling,
                };
                if ctx.reservations.hold(&job_uid, reservation) {
                    let _ = ctx.triggers.send(job.key.clone());
                }
            }
            Ok(Action::requeue(after))
        }
        CheckStep::Ready(message) => answer.write(CheckState::Ready, &message, None).await,
        CheckStep::Explain { state, message } => {
            if !answer.shown(state, &message) {
                answer.write(state, &message, None).await?;
            }
            Ok(Action::requeue(check::WATCH_ADMITTED))
        }
        CheckStep::Retry { message, after } => {
            ctx.reservations.release(&job_uid);
            answer.write(CheckState::Retry, &message, Some(after)).await
        }
        CheckStep::Rejected(message) => {
            ctx.reservations.release(&job_uid);
            if let Some(job) = &job {
                let regarding = job.reference.clone();
                let note = format!("admission check {}: {message}", names.join(", "));
                ctx.events
                    .publish(&regarding, Reason::AdmissionCheckRejected, note);
            }
            answer.write(CheckState::Rejected, &message, None).await
        }
        CheckStep::Withdraw { why, avoid } => {
            ctx.reservations.release(&job_uid);
            let avoid_for = avoid.then_some(ctx.avoid_after_pods_not_ready);
            let withdrawal = Withdrawal {
                why,
                avoid_for,
                ..Withdrawal::default()
            };
            withdraw(&job, &job_uid, withdrawal, &ctx);
            Ok(Action::await_change())
        }
        CheckStep::SendBack {
            message,
            after,
            not_admitted,
        } => {
            ctx.reservations.release(&job_uid);
            let withdrawal = Withdrawal {
                why: message.clone(),
                not_admitted,
                ..Withdrawal::default()
            };
            withdraw(&job, &job_uid, withdrawal, &ctx);
            answer.write(CheckState::Retry, &message, Some(after)).await
        }
    }
}

/// Asks the Job controller to withdraw the Job's mirror, and wakes it.
fn withdraw(job: &Option<Owned>, job_uid: &str, withdrawal: Withdrawal, ctx: &Context) {
    let Some(job) = job else {
        return;
    };
    info!(?withdrawal, "withdrawing the Job's mirror");
    if ctx.reservations.withdraw(job_uid, withdrawal) {
        let _ = ctx.triggers.send(job.key.clone());
    }
}
