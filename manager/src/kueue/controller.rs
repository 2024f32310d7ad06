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
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, controller, watcher};
use kube::{Resource, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::{debug, info, instrument, warn};

use super::check::{self, CheckState, CheckStep, Input, JobSide, WorkerKueueSide};
use super::owner::{self, Owner};
use super::scheduling::{self, Scheduling};
use super::types::{AdmissionCheck, ResourceFlavor, Workload};
use super::worker_queue::worker_admitted;
use super::{CONTROLLER_NAME, Reservation, Reservations, Withdrawal};
use crate::clusters::registry::Registry;
use crate::clusters::worker_cluster_set::WorkerClusterSet;
use crate::fleet::Fleet;
use crate::job::placement::{assigned_cluster, pinned_cluster, preferences};
use crate::telemetry::events::{Events, Reason};

/// How often an AdmissionCheck's `Active` condition is looked at again, so
/// that it follows agents connecting and leaving.
const ACTIVE_RESYNC: Duration = Duration::from_secs(5);
/// Workloads reconciled at once.
const CONCURRENCY: u16 = 16;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
}

pub struct Context {
    pub client: kube::Client,
    pub checks: Store<AdmissionCheck>,
    pub flavors: Store<ResourceFlavor>,
    pub sets: Store<WorkerClusterSet>,
    pub jobs: Store<Job>,
    pub registry: Registry,
    pub fleet: Arc<Fleet>,
    pub reservations: Arc<Reservations>,
    /// Wakes the Job controller for a Job.
    pub triggers: mpsc::UnboundedSender<ObjectRef<Job>>,
    /// A rejection shows on the Job too.
    pub events: Events,
    /// How long placement avoids a cluster where a Job's Pods did not
    /// become ready (`kueue.avoidAfterPodsNotReady`).
    pub avoid_after_pods_not_ready: Duration,
}

/// Runs the Workload and AdmissionCheck controllers until shutdown;
/// `woken` names Workloads whose Job or mirror changed.
pub(super) async fn run(
    ctx: Context,
    shutdown: Shutdown,
    woken: mpsc::UnboundedReceiver<ObjectRef<Workload>>,
) {
    // A Workload looked at before the caches listed would look like none of
    // jobrelay's business, and not be looked at again until it changes.
    let listed = futures::future::try_join3(
        ctx.checks.wait_until_ready(),
        ctx.flavors.wait_until_ready(),
        ctx.jobs.wait_until_ready(),
    );
    if listed.await.is_err() {
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
    let registered: BTreeSet<String> = ctx
        .registry
        .clusters
        .state()
        .iter()
        .map(|c| c.name_any())
        .collect();
    let connected: BTreeSet<String> = ctx.fleet.candidates().into_iter().map(|c| c.name).collect();
    let (active, reason, message) = check::active(&allowed, &registered, &connected);
    let status = if active { "True" } else { "False" };
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
    api.patch_status(&check.name_any(), &apply_params(), &Patch::Apply(body))
        .await
        .map_err(|source| Error::Kube {
            what: format!(
                "AdmissionCheck {}: writing status.conditions[Active]",
                check.name_any()
            ),
            source,
        })?;
    Ok(Action::requeue(ACTIVE_RESYNC))
}

fn check_api_version() -> String {
    format!("{}/{}", super::types::GROUP, super::types::VERSION)
}

fn apply_params() -> PatchParams {
    crate::field_manager::apply()
}

/// Answers jobrelay's check on one Workload.
#[instrument(skip_all, fields(workload = %ObjectRef::from_obj(workload.as_ref())))]
async fn reconcile_workload(workload: Arc<Workload>, ctx: Arc<Context>) -> Result<Action, Error> {
    let checks = jobrelay_checks(&workload, &ctx.checks, &ctx.sets);
    if checks.is_empty() {
        return Ok(Action::await_change());
    }
    let names: Vec<String> = checks.iter().map(|(name, _)| name.clone()).collect();
    let allowed = check::all_allowed(checks.into_iter().map(|(_, allowed)| allowed));
    let namespace = workload.namespace().unwrap_or_default();
    let job = workload.owner_job().and_then(|(name, uid)| {
        ctx.jobs
            .get(&ObjectRef::new(name).within(&namespace))
            .filter(|job| job.metadata.uid.as_deref() == Some(uid))
    });
    let job_uid = workload
        .owner_job()
        .map(|(_, uid)| uid.to_string())
        .unwrap_or_default();
    // What the assigned flavors add to the Job's template on admission.
    let scheduling = workload
        .status
        .as_ref()
        .and_then(|s| s.admission.as_ref())
        .map(|admission| {
            let flavors = ctx.flavors.state();
            let own = scheduling::own(&workload.spec.pod_sets);
            scheduling::from_admission(admission, &own, |name| {
                flavors
                    .iter()
                    .find(|f| f.name_any() == name)
                    .map(|f| &f.spec)
            })
        })
        .unwrap_or_else(|| Ok(Scheduling::default()));
    let owner = match workload.owner() {
        None => Owner::None,
        Some(o) if o.kind == "Job" && o.api_version == "batch/v1" => Owner::Job {
            name: o.name.clone(),
            cached: job.is_some(),
            managed_by: job
                .as_ref()
                .and_then(|j| j.spec.as_ref()?.managed_by.clone()),
        },
        Some(o) => Owner::Other {
            api_version: o.api_version.clone(),
            kind: o.kind.clone(),
            name: o.name.clone(),
        },
    };
    let preferences = job
        .as_deref()
        .map(|job| preferences(job, Timestamp::now()))
        .unwrap_or_default();
    let input = Input {
        not_ours: owner::not_ours(&owner),
        quota_reserved: workload.has("QuotaReserved"),
        finished: workload.has("Finished"),
        evicted: workload.has("Evicted"),
        evicted_for: workload
            .reason_of("Evicted")
            .unwrap_or_default()
            .to_string(),
        state: check::joint_state(names.iter().map(|name| {
            workload
                .check(name)
                .and_then(|c| CheckState::parse(&c.state))
        })),
        job: job
            .as_deref()
            .map(|job| job_side(job, &job_uid, scheduling.as_ref().ok(), &ctx)),
        placeable: ctx.fleet.candidates().iter().any(|c| {
            allowed.as_ref().is_ok_and(|a| a.allows(&c.name))
                && ctx.registry.admits(&c.name, &namespace).is_ok()
                && !preferences.avoids(&c.name)
        }),
        avoiding: preferences
            .avoiding
            .as_ref()
            .map(|(cluster, until)| (cluster.clone(), until.to_string())),
        allowed: allowed.clone(),
        reserved_for: ctx.reservations.held_for(&job_uid),
    };
    let step = check::decide(&input);
    debug!(?step, "admission check");
    match step {
        CheckStep::Idle => {
            ctx.reservations.release(&job_uid);
            Ok(Action::await_change())
        }
        CheckStep::Wait(after) => Ok(Action::requeue(after)),
        CheckStep::Admitted(after) => {
            ctx.reservations.release(&job_uid);
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
                && let Ok(allowed) = allowed
            {
                let reservation = Reservation {
                    job: ObjectRef::from_obj(job.as_ref()),
                    workload: ObjectRef::from_obj(workload.as_ref()),
                    allowed,
                    scheduling,
                };
                if ctx.reservations.hold(&job_uid, reservation) {
                    let _ = ctx.triggers.send(ObjectRef::from_obj(job.as_ref()));
                }
            }
            Ok(Action::requeue(after))
        }
        CheckStep::Ready(message) => {
            write_state(&workload, &names, CheckState::Ready, &message, None, &ctx).await
        }
        CheckStep::Retry { message, after } => {
            ctx.reservations.release(&job_uid);
            write_state(
                &workload,
                &names,
                CheckState::Retry,
                &message,
                Some(after),
                &ctx,
            )
            .await
        }
        CheckStep::Rejected(message) => {
            ctx.reservations.release(&job_uid);
            if let Some(job) = &job {
                let regarding = job.object_ref(&());
                let note = format!("admission check {}: {message}", names.join(", "));
                ctx.events
                    .publish(&regarding, Reason::AdmissionCheckRejected, note);
            }
            write_state(
                &workload,
                &names,
                CheckState::Rejected,
                &message,
                None,
                &ctx,
            )
            .await
        }
        CheckStep::Withdraw { why, avoid } => {
            ctx.reservations.release(&job_uid);
            let avoid_for = avoid.then_some(ctx.avoid_after_pods_not_ready);
            let withdrawal = Withdrawal {
                why,
                not_admitted: false,
                avoid_for,
            };
            withdraw(&job, &job_uid, withdrawal, &ctx);
            Ok(Action::await_change())
        }
        CheckStep::NotAdmitted { message, after } => {
            ctx.reservations.release(&job_uid);
            let withdrawal = Withdrawal {
                why: message.clone(),
                not_admitted: true,
                avoid_for: None,
            };
            withdraw(&job, &job_uid, withdrawal, &ctx);
            write_state(
                &workload,
                &names,
                CheckState::Retry,
                &message,
                Some(after),
                &ctx,
            )
            .await
        }
    }
}

/// Asks the Job controller to withdraw the Job's mirror, and wakes it.
fn withdraw(job: &Option<Arc<Job>>, job_uid: &str, withdrawal: Withdrawal, ctx: &Context) {
    let Some(job) = job else {
        return;
    };
    info!(?withdrawal, "withdrawing the Job's mirror");
    if ctx.reservations.withdraw(job_uid, withdrawal) {
        let _ = ctx.triggers.send(ObjectRef::from_obj(job.as_ref()));
    }
}

/// Every one of the Workload's checks that jobrelay controls, with what its
/// parameters allow.
fn jobrelay_checks(
    workload: &Workload,
    checks: &Store<AdmissionCheck>,
    sets: &Store<WorkerClusterSet>,
) -> Vec<(String, Result<check::Allowed, String>)> {
    workload
        .status
        .iter()
        .flat_map(|s| &s.admission_checks)
        .filter_map(|state| {
            let check = checks.get(&ObjectRef::new(&state.name))?;
            (check.spec.controller_name == CONTROLLER_NAME)
                .then(|| (state.name.clone(), allowed(&check, sets)))
        })
        .collect()
}

/// What a check's parameters allow, WorkerClusterSets read from the cache.
fn allowed(
    check: &AdmissionCheck,
    sets: &Store<WorkerClusterSet>,
) -> Result<check::Allowed, String> {
    check::allowed(check.spec.parameters.as_ref(), |name| {
        sets.get(&ObjectRef::new(name))
            .map(|set| set.spec.clusters.clone())
    })
}

/// Where `job` stands; `scheduling`: what its Workload's flavors add, if
/// the flavor cache knows them all.
fn job_side(job: &Job, uid: &str, scheduling: Option<&Scheduling>, ctx: &Context) -> JobSide {
    let cluster = assigned_cluster(job).map(str::to_string);
    let view = cluster.as_deref().and_then(|c| ctx.fleet.view(c, uid));
    let mirror_held = view
        .as_ref()
        .is_some_and(|v| v.held_revision.is_some() && v.gone.is_none() && v.lost.is_none());
    let queued = is_queued(job);
    let worker_kueue = cluster
        .as_deref()
        .filter(|_| queued)
        .and_then(|c| ctx.registry.worker_queue(c))
        .map(|worker| WorkerKueueSide {
            admitted: mirror_held && view.as_ref().is_some_and(|v| worker_admitted(v.phase)),
            admit_within: worker.admit_within,
        });
    let pinned = pinned_cluster(job);
    JobSide {
        pinned: pinned.map(str::to_string),
        pinned_connected: pinned.is_some_and(|c| ctx.fleet.is_connected(c)),
        mirror_held,
        cluster_connected: cluster
            .as_deref()
            .is_some_and(|c| ctx.fleet.is_connected(c)),
        cluster_lost: cluster.as_deref().is_some_and(|c| ctx.fleet.is_lost(c)),
        worker_kueue,
        withdrawing: ctx.reservations.withdrawal(uid).is_some(),
        flavors_to_record: scheduling.is_none_or(|s| scheduling::to_record(job, s).is_some()),
        cluster,
    }
}

/// The Job names a Kueue LocalQueue.
pub fn is_queued(job: &Job) -> bool {
    job.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(jobrelay_proto::wire::QUEUE_NAME_LABEL))
}

/// Sets the check's state on the Workload (server-side apply of that one
/// entry of `status.admissionChecks`).
async fn write_state(
    workload: &Workload,
    checks: &[String],
    state: CheckState,
    message: &str,
    requeue_after: Option<Duration>,
    ctx: &Context,
) -> Result<Action, Error> {
    let name = workload.name_any();
    let namespace = workload.namespace().unwrap_or_default();
    let now = Timestamp::now().to_string();
    let entries: Vec<serde_json::Value> = checks
        .iter()
        .map(|check| {
            let mut entry = json!({
                "name": check, "state": state.as_str(), "message": message,
                "lastTransitionTime": now,
            });
            if let Some(after) = requeue_after {
                entry["requeueAfterSeconds"] = json!(after.as_secs());
            }
            entry
        })
        .collect();
    let check = checks.join(", ");
    // The Workload as read: a state decided on a stale copy is refused
    // (409) and decided again.
    let body = json!({
        "apiVersion": check_api_version(),
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "resourceVersion": workload.resource_version(),
        },
        "status": {"admissionChecks": entries},
    });
    info!(
        check,
        state = state.as_str(),
        message,
        "admission check state"
    );
    let api: Api<Workload> = Api::namespaced(ctx.client.clone(), &namespace);
    api.patch_status(&name, &apply_params(), &Patch::Apply(body))
        .await
        .map_err(|source| Error::Kube {
            what: format!(
                "Workload {namespace}/{name}: setting admission check {check} to {}",
                state.as_str()
            ),
            source,
        })?;
    Ok(Action::await_change())
}
