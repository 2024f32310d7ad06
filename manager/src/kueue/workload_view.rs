//! What jobrelay knows of one Workload that lists its check, read from the
//! caches: the [`Input`] of the check's decision, and what answering it
//! takes besides (the checks' names, the owning Job, the flavors).

use std::time::Instant;

use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::kinds::KindName;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};

use super::CONTROLLER_NAME;
use super::check::{self, Input, JobSide, QueuedMirror, RuledOut, WorkerKueueSide};
use super::context::Context;
use super::owner::{self, Owner};
use super::scheduling::{self, Scheduling};
use super::types::{AdmissionCheck, Workload};
use super::worker_queue::queued_mirror;
use crate::clusters::worker_cluster::MoveTimeout;
use crate::clusters::worker_cluster_set::WorkerClusterSet;
use crate::job::held_pods;
use crate::job::placement::{Preferences, assigned_cluster, pinned_cluster, preferences};
use crate::job::pods_why;
use crate::job::refused::{self, Refused};
use crate::job::stuck;
use crate::kinds::Key;
use crate::kinds::{PodCounts, RelayedKind};
use crate::mirror::StatusText;

pub(super) struct View {
    /// jobrelay's checks on the Workload.
    pub names: Vec<String>,
    pub input: Input,
    /// The owning Job or JobSet, if the manager's cache holds it.
    pub job: Option<Owned>,
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
        let job_uid = workload.owner().map(|o| o.uid.clone()).unwrap_or_default();
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
        let found = Found::of(workload, &namespace, scheduling.as_ref().ok(), ctx);
        let owner = match (workload.owner(), &found) {
            (None, _) => Owner::None,
            (Some(o), Found::Relayed { kind, object }) => Owner::Relayed {
                kind,
                name: o.name.clone(),
                cached: object.is_some(),
                managed_by: object.as_ref().and_then(|o| o.managed_by.clone()),
            },
            (Some(o), Found::Unwatched(kind)) => Owner::Unwatched {
                kind,
                name: o.name.clone(),
            },
            (Some(o), Found::Other) => Owner::Other {
                api_version: o.api_version.clone(),
                kind: o.kind.clone(),
                name: o.name.clone(),
            },
        };
        let job = match found {
            Found::Relayed { object, .. } => object.map(|owned| *owned),
            Found::Unwatched(_) | Found::Other => None,
        };
        let preferences = job
            .as_ref()
            .map(|job| job.preferences.clone())
            .unwrap_or_default();
        // The connected clusters the check allows, each with what rules it
        // out for the Job, if anything does.
        let candidates: Vec<(String, Option<RuledOut>)> = ctx
            .fleet
            .candidates()
            .into_iter()
            .filter(|c| allowed.as_ref().is_ok_and(|a| a.allows(&c.name)))
            .map(|c| {
                let why = if ctx.registry.admits(&c.name, &namespace).is_err() {
                    Some(RuledOut::Namespace(namespace.clone()))
                } else {
                    job.as_ref()
                        .map(|j| j.key.kind)
                        .filter(|kind| !ctx.fleet.takes(&c.name, *kind))
                        .map(|kind| RuledOut::Kind(kind.kind))
                };
                (c.name, why)
            })
            .collect();
        // A connected cluster not ruled out by the namespace admits it;
        // else every registered one the check allows is looked at.
        let admitted_nowhere = candidates
            .iter()
            .all(|(_, why)| matches!(why, Some(RuledOut::Namespace(_))))
            && admitted_nowhere(&namespace, allowed.as_ref().ok(), ctx);
        let input = Input {
            not_ours: owner::not_ours(&owner),
            quota_reserved: workload.has("QuotaReserved"),
            finished: workload.has("Finished"),
            evicted: workload.has("Evicted"),
            evicted_for: workload
                .reason_of("Evicted")
                .unwrap_or_default()
                .to_string(),
            state: check::joint_state(
                names
                    .iter()
                    .map(|name| workload.check(name).and_then(|c| c.state)),
            ),
            retries: names
                .iter()
                .filter_map(|name| workload.check(name)?.retry_count)
                .map(|count| u32::try_from(count).unwrap_or(0))
                .max()
                .unwrap_or(0),
            job: job.as_ref().map(|job| job.side(&job_uid, ctx)),
            placeable: candidates
                .iter()
                .any(|(c, ruled_out)| ruled_out.is_none() && !preferences.avoids(c)),
            ruled_out: candidates
                .iter()
                .filter_map(|(c, why)| Some((c.clone(), why.clone()?)))
                .collect(),
            avoiding: preferences
                .avoiding
                .as_ref()
                .map(|(cluster, until)| (cluster.clone(), until.to_string())),
            allowed: allowed.clone(),
            reserved_for: ctx.reservations.held_for(&job_uid),
            no_room: ctx
                .fleet
                .awaiting_room(&job_uid)
                .filter(|(_, ago)| *ago <= ctx.reservations.held_for(&job_uid))
                .map(|(no_room, _)| no_room.why),
            namespace_admitted_nowhere: admitted_nowhere.then(|| namespace.clone()),
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

/// Whether no registered WorkerCluster `allowed` lets the check use —
/// connected or not — admits `namespace`: an administrator's change, not
/// time, lets such a Job run. Said only once the namespace's labels are
/// cached.
fn admitted_nowhere(namespace: &str, allowed: Option<&check::Allowed>, ctx: &Context) -> bool {
    let Some(allowed) = allowed else {
        return false;
    };
    let clusters = ctx.registry.clusters.state();
    let mut allowed_registered = clusters
        .iter()
        .map(|c| c.name_any())
        .filter(|c| allowed.allows(c))
        .peekable();
    ctx.registry.knows_namespace(namespace)
        && allowed_registered.peek().is_some()
        && allowed_registered.all(|c| ctx.registry.admits(&c, namespace).is_err())
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
        sets.get(&ObjectRef::new(name)).map(|set| set.spec.clone())
    })
}

/// The relayed object that owns a Workload, as the check reads it.
pub(super) struct Owned {
    pub key: Key,
    /// Where its Events go.
    pub reference: ObjectReference,
    managed_by: Option<String>,
    preferences: Preferences,
    cluster: Option<String>,
    pinned: Option<String>,
    queued: bool,
    /// Whether the reservation's flavors are still to be recorded on it, or
    /// not known yet.
    flavors_to_record: bool,
    /// Its annotation moves it off a cluster where its Pods find no node
    /// even after one of them ran.
    even_after_a_pod_ran: bool,
    /// What a copied status of its kind counts of the mirror's Pods.
    pods_counted: fn(&StatusText) -> Option<PodCounts>,
}

/// What the caches hold of a Workload's owner.
enum Found {
    /// A kind jobrelay relays; `None` while the cache lacks it.
    Relayed {
        kind: &'static str,
        object: Option<Box<Owned>>,
    },
    /// A kind jobrelay relays that this manager does not watch.
    Unwatched(&'static str),
    Other,
}

impl Found {
    fn of(
        workload: &Workload,
        namespace: &str,
        scheduling: Option<&Scheduling>,
        ctx: &Context,
    ) -> Found {
        let Some(owner) = workload.owner() else {
            return Found::Other;
        };
        let api_version = |kind: KindName| format!("{}/{}", kind.group, kind.version);
        let kind = (owner.kind.as_str(), owner.api_version.as_str());
        if kind == (Job::NAME.kind, api_version(Job::NAME).as_str()) {
            let object = owned(&ctx.stores.jobs, namespace, owner, |job| {
                scheduling.is_none_or(|s| scheduling::to_record(job, s).is_some())
            });
            Found::Relayed {
                kind: Job::NAME.kind,
                object,
            }
        } else if kind == (JobSet::NAME.kind, api_version(JobSet::NAME).as_str()) {
            let Some(store) = &ctx.stores.jobsets else {
                return Found::Unwatched(JobSet::NAME.kind);
            };
            Found::Relayed {
                kind: JobSet::NAME.kind,
                object: owned(store, namespace, owner, |jobset| {
                    scheduling.is_none_or(|s| scheduling::to_record(jobset, s).is_some())
                }),
            }
        } else {
            Found::Other
        }
    }
}

/// The cached `K` that `owner` names, if it is the one of that UID.
fn owned<K: RelayedKind>(
    store: &Store<K>,
    namespace: &str,
    owner: &OwnerReference,
    to_record: impl Fn(&K) -> bool,
) -> Option<Box<Owned>> {
    let object = store
        .get(&ObjectRef::new(&owner.name).within(namespace))
        .filter(|o| o.meta().uid.as_deref() == Some(owner.uid.as_str()))?;
    Some(Box::new(Owned {
        key: Key::from_obj(object.as_ref()),
        reference: object.object_ref(&()),
        managed_by: object.managed_by().map(str::to_string),
        preferences: preferences(object.as_ref(), Timestamp::now()),
        cluster: assigned_cluster(object.as_ref()).map(str::to_string),
        pinned: pinned_cluster(object.as_ref()).map(str::to_string),
        queued: is_queued(object.as_ref()),
        flavors_to_record: to_record(object.as_ref()),
        even_after_a_pod_ran: stuck::moves_even_after_a_pod_ran(object.as_ref()),
        pods_counted: |status| status.read::<K::Status>().and_then(|s| K::pods_counted(&s)),
    }))
}

impl Owned {
    /// Where it stands.
    fn side(&self, uid: &str, ctx: &Context) -> JobSide {
        let cluster = self.cluster.clone();
        let view = cluster.as_deref().and_then(|c| ctx.fleet.view(c, uid));
        let mirror_held = view
            .as_ref()
            .is_some_and(|v| v.state.held().is_some() && !v.state.lost_or_gone());
        let worker_kueue = cluster
            .as_deref()
            .filter(|_| self.queued)
            .and_then(|c| ctx.registry.worker_queue(c))
            .map(|worker| WorkerKueueSide {
                mirror: match view.as_ref().map(|v| v.state.phase()) {
                    Some(phase) if mirror_held => queued_mirror(phase),
                    _ => QueuedMirror::NotHeld,
                },
                admit_within: worker.admit_within,
            });
        let unschedulable =
            cluster
                .as_deref()
                .zip(view.as_ref())
                .map_or(stuck::Waiting::No, |(c, v)| {
                    let rules = stuck::MoveRules {
                        movable: self.pinned.is_none(),
                        even_after_a_pod_ran: self.even_after_a_pod_ran,
                        timeout: ctx.registry.move_timeout(c, MoveTimeout::Unschedulable),
                    };
                    let waiting = v.state.held().and_then(|h| h.unschedulable.as_ref());
                    let counts = v.state.status().and_then(self.pods_counted);
                    stuck::waiting(c, waiting, counts, &rules, Instant::now())
                });
        let refused = cluster
            .as_deref()
            .zip(view.as_ref())
            .map_or(Refused::No, |(c, v)| {
                let timeout = ctx.registry.move_timeout(c, MoveTimeout::Refused);
                let movable = self.pinned.is_none();
                refused::refused(c, &v.state, movable, timeout, Instant::now())
            });
        let pinned = self.pinned.clone();
        JobSide {
            unschedulable,
            refused,
            pinned_connected: pinned.as_deref().is_some_and(|c| ctx.fleet.is_connected(c)),
            pinned,
            mirror_held,
            cluster_connected: cluster
                .as_deref()
                .is_some_and(|c| ctx.fleet.is_connected(c)),
            cluster_lost: cluster.as_deref().is_some_and(|c| ctx.fleet.is_lost(c)),
            worker_kueue,
            withdrawing: ctx.reservations.withdrawal(uid).is_some(),
            pods_held: cluster.as_deref().zip(view.as_ref()).and_then(|(c, v)| {
                let timeout = ctx.registry.get(c)?.terminating_pod_timeout().ok()?;
                held_pods::holding_quota(c, v.state.pods_held(), timeout)
            }),
            pods_why: cluster.as_deref().zip(view.as_ref()).and_then(|(c, v)| {
                let pods = v.state.held()?.pods.as_ref()?;
                pods_why::annotation(c, pods)
            }),
            flavors_to_record: self.flavors_to_record,
            cluster,
        }
    }
}

/// The Job names a Kueue LocalQueue.
pub fn is_queued<K: kube::Resource>(job: &K) -> bool {
    job.meta()
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(jobrelay_proto::wire::QUEUE_NAME_LABEL))
}
