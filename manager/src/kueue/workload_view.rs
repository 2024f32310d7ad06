//! What jobrelay knows of one Workload that lists its check, read from the
//! caches: the [`Input`] of the check's decision, and what answering it
//! takes besides (the checks' names, the owning Job, the flavors).

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::CONTROLLER_NAME;
use super::check::{self, CheckState, Input, JobSide, WorkerKueueSide};
use super::context::Context;
use super::owner::{self, Owner};
use super::scheduling::{self, Scheduling};
use super::types::{AdmissionCheck, Workload};
use super::worker_queue::worker_admitted;
use crate::clusters::worker_cluster_set::WorkerClusterSet;
use crate::job::placement::{assigned_cluster, pinned_cluster, preferences};

pub(super) struct View {
    /// jobrelay's checks on the Workload.
    pub names: Vec<String>,
    pub input: Input,
    /// The owning Job, if it is a cached batch/v1 Job.
    pub job: Option<Arc<Job>>,
    pub job_uid: String,
    /// What the assigned flavors add to the Job's template on admission,
    /// or why that cannot be known yet.
    pub scheduling: Result<Scheduling, String>,
}

impl View {
    /// The Workload as jobrelay's check sees it; `None` if it lists no
    /// jobrelay check.
    pub(super) fn of(workload: &Workload, ctx: &Context) -> Option<View> {
        let checks = jobrelay_checks(workload, &ctx.checks, &ctx.sets);
        if checks.is_empty() {
            return None;
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
                .map(|job| job_side(job, &job_uid, scheduling.as_ref().ok(), ctx)),
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
        Some(View {
            names,
            input,
            job,
            job_uid,
            scheduling,
        })
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
pub(super) fn allowed(
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
pub fn is_queued<K: kube::Resource>(job: &K) -> bool {
    job.meta()
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(jobrelay_proto::wire::QUEUE_NAME_LABEL))
}
