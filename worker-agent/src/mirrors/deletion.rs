//! Deleting a mirror: the mirror and its children (a JobSet's Jobs) with
//! Background propagation and a UID precondition, then any Pod that
//! outlived them past the orphan grace, and `MirrorGone` only once the API
//! server shows none of them and no Pod of its origin UID — Terminating
//! ones count as existing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::kinds::{JOB, JOBSET};
use jobrelay_proto::v1::{AgentMessage, DeleteMirror, MirrorLost, agent_message::Kind};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ObjectMeta, Preconditions, PropagationPolicy};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::confirm::Gone;
use super::direct::Direct;
use super::mirror::{Deletion, Event, Lost};
use super::reads::{Scope, scope_of};
use super::{Looking, Mirrors, Snapshot, agent_message, concurrently};
use crate::kinds::{Mirror, MirrorKind};
use crate::teardown::{self, Deleted, Leftover, Next};

/// How long after a delete without effect it is sent again.
const DELETE_RESEND: Duration = Duration::from_secs(5);
/// Deletions in flight above which progress is logged.
const BACKLOG: usize = 100;
/// How often progress on a backlog is logged.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// What one pass's deletion steps found due.
#[derive(Default)]
struct Due {
    job_deletes: Vec<Arc<dyn Mirror>>,
    pod_deletes: Vec<(String, Arc<Pod>)>,
    /// The mirrors the caches show gone.
    gone: Vec<Gone>,
}

impl Mirrors {
    /// Starts deleting a mirror at the manager's request; an apply waiting
    /// for it is dropped.
    pub fn delete(&mut self, delete: DeleteMirror) {
        self.desired
            .deleted(&delete.origin_uid, Some(&delete.namespace));
        info!(uid = %delete.origin_uid, namespace = %delete.namespace, name = %delete.name, reason = delete.reason().as_str_name(), "deleting mirror");
        let kind = [JOB, JOBSET]
            .into_iter()
            .find(|kind| kind.is(delete.kind.as_ref()));
        let deletion = Deletion::new(delete.namespace, delete.name, kind, None);
        self.on(&delete.origin_uid, Event::Delete(deletion), &mut Vec::new());
    }

    /// Starts deleting a mirror the agent found to delete itself.
    pub(super) fn begin_delete(&mut self, uid: String, namespace: String, name: String) {
        self.begin_found(&uid, Deletion::new(namespace, name, None, None));
    }

    /// Starts deleting what is left of a mirror lost behind jobrelay's back;
    /// the manager is told (again after each reconnect) until it is gone.
    pub(super) fn begin_lost(&mut self, uid: String, namespace: String, name: String, lost: Lost) {
        self.begin_found(&uid, Deletion::new(namespace, name, None, Some(lost)));
    }

    fn begin_found(&mut self, uid: &str, deletion: Deletion) {
        self.on(uid, Event::Found(deletion), &mut Vec::new());
    }

    /// Tells the manager of every lost mirror it has not heard of in this
    /// session.
    pub(super) fn report_lost(&mut self, out: &mut Vec<AgentMessage>) {
        self.records.each_deletion(|uid, deletion| {
            let Some(lost) = deletion.lost.as_mut().filter(|l| !l.reported) else {
                return;
            };
            lost.reported = true;
            out.push(agent_message(Kind::MirrorLost(MirrorLost {
                origin_uid: uid.to_string(),
                mirror_uid: lost.mirror_uid.clone().unwrap_or_default(),
                observed: lost.observed.clone(),
            })));
        });
    }

    /// Runs one step of the deletion machine (`teardown::step`) for every
    /// mirror being deleted, then sends what the steps decided, 16 requests
    /// at a time, drawing on the deletion pace.
    pub(super) async fn drive_deletions(
        &mut self,
        snapshot: &Snapshot,
        out: &mut Vec<AgentMessage>,
    ) {
        let unwatched = self.unwatched_deletions(snapshot);
        let mut direct = self.read_directly(unwatched).await;
        for (namespace, mirrors, reason) in std::mem::take(&mut direct.unread) {
            self.log_unconfirmed(&namespace, mirrors, &reason);
        }
        let due = self.step_deletions(snapshot, &direct, Instant::now());
        self.send_deletes(due.job_deletes, due.pod_deletes).await;
        self.confirm_gone_and_report(due.gone, out).await;
    }

    /// The deletion machine's step for each mirror `snapshot` shows being
    /// deleted: what to delete now, and what looks gone. A mirror in a
    /// namespace outside the watches steps on what `direct` read of it, and
    /// waits when its namespace could not be read: the caches show nothing
    /// of it, which says nothing.
    fn step_deletions(&mut self, snapshot: &Snapshot, direct: &Direct, now: Instant) -> Due {
        let looking = |snapshot| Looking {
            snapshot,
            now,
            grace: self.orphan_pod_grace,
            deletions: &self.deletions,
        };
        let (cached, read) = (looking(snapshot), looking(&direct.snapshot));
        let mut due = Due::default();
        let records = &self.records;
        let visited = snapshot.visited(records.deleting(), |uid| records.is_deleting(uid));
        for uid in &visited {
            // A create still out could land after "gone" was confirmed: the
            // deletion waits for its answer, which brings the mirror back to
            // the next pass.
            let Some(deletion) = self.records.deletion_to_drive(uid) else {
                continue;
            };
            let looking = match scope_of(&self.policy, &deletion.namespace) {
                Scope::Unwatched if direct.read.contains(uid) => &read,
                Scope::Unwatched => continue,
                Scope::Watched | Scope::NeverWritten => &cached,
            };
            step_deletion(deletion, uid, looking, &mut due);
        }
        due
    }

    /// Deletes the Jobs and Pods due, counting each mirror's Pods deleted.
    async fn send_deletes(
        &mut self,
        job_deletes: Vec<Arc<dyn Mirror>>,
        pod_deletes: Vec<(String, Arc<Pod>)>,
    ) {
        let client = &self.client;
        concurrently(
            job_deletes
                .iter()
                .map(|object| delete_mirror(client, object.as_ref())),
        )
        .await;
        let deleted_pods = concurrently(pod_deletes.into_iter().map(|(uid, pod)| async move {
            (delete_object::<Pod>(client, pod.meta()).await == Deleted::Now).then_some(uid)
        }))
        .await;
        for uid in deleted_pods.into_iter().flatten() {
            if let Some(deletion) = self.records.deletion_mut(&uid) {
                deletion.pods_deleted += 1;
            }
        }
    }

    /// Logs progress on a backlog of `deleting` deletions now and then.
    pub(super) fn log_progress(&mut self, deleting: usize) {
        if deleting <= BACKLOG
            || self
                .progress_logged
                .is_some_and(|at| at.elapsed() < PROGRESS_EVERY)
        {
            return;
        }
        self.progress_logged = Some(Instant::now());
        info!(
            in_progress = deleting,
            gone_so_far = self.confirmed_gone,
            "deletions: working off a backlog"
        );
    }
}

/// The deletion machine's step for one mirror being deleted: what to delete
/// now, as far as the deletion pace allows, and whether it looks gone, into
/// `due`.
fn step_deletion(deletion: &mut Deletion, uid: &str, looking: &Looking, due: &mut Due) {
    let Looking {
        snapshot,
        now,
        grace,
        deletions,
    } = *looking;
    // The mirror and its children (a JobSet's Jobs) go together.
    let jobs = snapshot.objects(uid);
    let pods = snapshot.pods(uid);
    let (progress, next) = teardown::step(
        deletion.progress,
        &jobs
            .iter()
            .map(|j| seen(j.object_meta()))
            .collect::<Vec<_>>(),
        &pods.iter().map(|p| seen(p.meta())).collect::<Vec<_>>(),
        now,
        grace,
        DELETE_RESEND,
    );
    match next {
        Next::Wait => deletion.progress = progress,
        Next::ConfirmGone => {
            deletion.progress = progress;
            due.gone.push(Gone {
                namespace: deletion.namespace.clone(),
                kind: deletion.kind,
                uid: uid.to_string(),
            });
        }
        // All of a Job's deletes or none, so none waits on a half.
        Next::DeleteJobs(jobs_due) if deletions.try_take_n(jobs_due.len()) => {
            deletion.progress = progress;
            due.job_deletes
                .extend(jobs_due.into_iter().map(|i| Arc::clone(&jobs[i])));
        }
        Next::DeleteJobs(_) => {}
        Next::DeletePods(pods_due) => {
            deletion.progress = progress;
            for i in pods_due {
                if !deletions.try_take_n(1) {
                    break;
                }
                info!(%uid, pod = %pods[i].name_any(), "Pod outlived its Job; deleting it");
                due.pod_deletes
                    .push((uid.to_string(), Arc::clone(&pods[i])));
            }
        }
    }
}

/// What the worker shows of an object or Pod, for the deletion machine.
fn seen(object: &ObjectMeta) -> Leftover {
    Leftover {
        terminating: object.deletion_timestamp.is_some(),
    }
}

/// Deletes one mirror object of any kind, as [`delete_object`] does.
pub(super) async fn delete_mirror(client: &kube::Client, object: &dyn Mirror) -> Deleted {
    let meta = object.object_meta();
    match object.kind_name() {
        kind if kind == JobSet::NAME => delete_object::<JobSet>(client, meta).await,
        _ => delete_object::<Job>(client, meta).await,
    }
}

/// Deletes one object (a `K` as `object` describes it) with Background
/// propagation and a UID precondition.
pub(super) async fn delete_object<K>(client: &kube::Client, object: &ObjectMeta) -> Deleted
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let (Some(namespace), Some(name)) = (object.namespace.clone(), object.name.clone()) else {
        return Deleted::NothingThere;
    };
    let api: Api<K> = Api::namespaced(client.clone(), &namespace);
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: object.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    let code = match api.delete(&name, &params).await {
        Ok(_) => None,
        Err(kube::Error::Api(status)) => Some(status.code),
        Err(error) => {
            warn!(%namespace, %name, %error, "delete failed; will retry");
            return Deleted::Failed;
        }
    };
    let outcome = teardown::deleted(code);
    if outcome == Deleted::Failed {
        warn!(%namespace, %name, ?code, "delete refused; will retry");
    }
    outcome
}

#[cfg(test)]
#[path = "deletion_tests.rs"]
mod tests;
