//! The mirrors of one worker cluster: applying them, reporting their status,
//! deleting them with Background propagation and confirming every Pod gone,
//! and sweeping what the manager no longer wants.
//!
//! The agent sees only objects carrying its manager's `jobrelay.dev/origin`
//! label (its watches select on it), and never touches anything else: a
//! same-named Job without that label is a conflict, reported and left alone.

use std::collections::{HashMap, HashSet};

use futures::StreamExt;
use std::time::{Duration, Instant};

use jobrelay_proto::v1::{
    AgentMessage, ApplyMirror, ApplyRejected, DeleteMirror, InventoryEntry, MirrorGone,
    MirrorPhase, MirrorStatus, RejectReason, agent_message::Kind,
};
use jobrelay_proto::wire::{ORIGIN_LABEL, ORIGIN_UID_LABEL};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
};
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};
use tracing::{debug, info, warn};

use crate::budget::Budget;
use crate::report::{ApplyFailure, apply_failure, phase_of, revision_of};

/// Field manager of everything the agent writes.
pub const FIELD_MANAGER: &str = "jobrelay-agent";

/// Requests (applies, deletes, confirmations) sent to the API server at once.
const REQUEST_CONCURRENCY: usize = 16;
/// How often a delete that has not taken effect is sent again.
const DELETE_RETRY: Duration = Duration::from_secs(5);
/// Deletions in flight above which progress is logged.
const BACKLOG: usize = 100;
/// How often progress on a backlog is logged.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// Orphans found in one sweep above which each is logged at debug only.
const LOG_EACH_UP_TO: usize = 20;

/// A mirror being deleted.
#[derive(Debug)]
struct Deletion {
    namespace: String,
    name: String,
    /// When the agent first saw no Job of this origin UID.
    job_gone_since: Option<Instant>,
    last_delete: Option<Instant>,
    pods_deleted: u32,
}

/// The last status sent for a mirror, and the Job's resourceVersion it was
/// read from (unchanged, and with as many Pods, nothing else can have).
#[derive(Debug)]
struct Sent {
    resource_version: Option<String>,
    report: Report,
}

/// What a MirrorStatus says; one is sent only when it differs.
#[derive(Debug, PartialEq)]
struct Report {
    revision: u64,
    phase: MirrorPhase,
    status: Vec<u8>,
    pods: u32,
}

pub struct Mirrors {
    client: kube::Client,
    origin: String,
    orphan_pod_grace: Duration,
    jobs: Store<Job>,
    pods: Store<Pod>,
    /// Origin UIDs the manager wants here (DesiredSet, then applies and deletes).
    desired: Option<HashSet<String>>,
    deleting: HashMap<String, Deletion>,
    /// Applies that must wait (an older mirror of that name is still going, or
    /// the API server had passing trouble).
    pending: HashMap<String, ApplyMirror>,
    sent: HashMap<String, Sent>,
    budget: Budget,
    /// Mirrors confirmed gone since start, and when progress was last logged.
    confirmed_gone: u64,
    progress_logged: Option<Instant>,
}

impl Mirrors {
    pub fn new(
        client: kube::Client,
        origin: String,
        orphan_pod_grace: Duration,
        deletions_per_second: u32,
        jobs: Store<Job>,
        pods: Store<Pod>,
    ) -> Self {
        Mirrors {
            client,
            origin,
            orphan_pod_grace,
            jobs,
            pods,
            desired: None,
            deleting: HashMap::new(),
            pending: HashMap::new(),
            sent: HashMap::new(),
            budget: Budget::per_second(deletions_per_second),
            confirmed_gone: 0,
            progress_logged: None,
        }
    }

    /// Waits until both watches have listed everything once.
    pub async fn wait_ready(&self) {
        let _ = self.jobs.wait_until_ready().await;
        let _ = self.pods.wait_until_ready().await;
    }

    /// A new session: what was sent before must be sent again, and the
    /// manager's DesiredSet is awaited before anything is swept.
    pub fn new_session(&mut self) {
        self.sent.clear();
        self.desired = None;
    }

    /// Every mirror found on the worker: Jobs of this origin, and origin UIDs
    /// that only Pods still carry.
    pub fn inventory(&self) -> Vec<InventoryEntry> {
        let mut entries: HashMap<String, InventoryEntry> = HashMap::new();
        for job in self.jobs.state() {
            let Some(uid) = origin_uid(job.meta()) else {
                continue;
            };
            entries.insert(
                uid.clone(),
                InventoryEntry {
                    origin_uid: uid,
                    revision: revision_of(&job),
                    namespace: job.namespace().unwrap_or_default(),
                    name: job.name_any(),
                    phase: self.phase(&job) as i32,
                },
            );
        }
        for pod in self.pods.state() {
            let Some(uid) = origin_uid(pod.meta()) else {
                continue;
            };
            entries
                .entry(uid.clone())
                .or_insert_with(|| InventoryEntry {
                    origin_uid: uid,
                    revision: 0,
                    namespace: pod.namespace().unwrap_or_default(),
                    name: String::new(),
                    phase: MirrorPhase::Deleting as i32,
                });
        }
        entries.into_values().collect()
    }

    fn phase(&self, job: &Job) -> MirrorPhase {
        match origin_uid(job.meta()) {
            Some(uid) if self.deleting.contains_key(&uid) => MirrorPhase::Deleting,
            _ => phase_of(job),
        }
    }

    /// The manager's complete list: anything else of this origin goes.
    pub fn set_desired(&mut self, desired: impl IntoIterator<Item = String>) {
        self.desired = Some(desired.into_iter().collect());
        self.sweep_orphans();
    }

    /// Starts deleting every Job and Pod of this origin whose origin UID the
    /// manager does not want (nothing before the first DesiredSet of a session).
    pub fn sweep_orphans(&mut self) {
        let Some(desired) = &self.desired else { return };
        let jobs = self.jobs.state().into_iter().filter_map(|job| {
            Some(HeldMirror {
                origin_uid: origin_uid(job.meta())?,
                namespace: job.namespace().unwrap_or_default(),
                name: job.name_any(),
            })
        });
        let pods = self.pods.state().into_iter().filter_map(|pod| {
            Some(HeldMirror {
                origin_uid: origin_uid(pod.meta())?,
                namespace: pod.namespace().unwrap_or_default(),
                name: String::new(),
            })
        });
        let orphans = orphans(jobs.chain(pods), desired, |uid| {
            self.deleting.contains_key(uid)
        });
        if orphans.len() > LOG_EACH_UP_TO {
            info!(
                orphans = orphans.len(),
                "orphan sweep: deleting what the manager does not want"
            );
        }
        for HeldMirror {
            origin_uid: uid,
            namespace,
            name,
        } in orphans
        {
            if self.deleting.len() < LOG_EACH_UP_TO {
                info!(%uid, %namespace, %name, "not desired by the manager; deleting");
            } else {
                debug!(%uid, %namespace, %name, "not desired by the manager; deleting");
            }
            self.begin_delete(uid, namespace, name);
        }
    }

    /// Applies mirrors, up to [`REQUEST_CONCURRENCY`] at once, and reports
    /// those that cannot be held.
    pub async fn apply_all(&mut self, applies: Vec<ApplyMirror>, out: &mut Vec<AgentMessage>) {
        let mut ready = Vec::new();
        for apply in applies {
            let uid = apply.origin_uid.clone();
            if let Some(desired) = &mut self.desired {
                desired.insert(uid.clone());
            }
            if self.deleting.contains_key(&uid) {
                debug!(%uid, "apply waits for the previous mirror to be gone");
                self.pending.insert(uid, apply);
            } else {
                ready.push(apply);
            }
        }
        if ready.is_empty() {
            return;
        }
        let this = &*self;
        let results = concurrently(ready.into_iter().map(|apply| async move {
            let result = this.try_apply(&apply).await;
            (apply, result)
        }))
        .await;
        for (apply, result) in results {
            let uid = apply.origin_uid.clone();
            match result {
                Ok(()) => {
                    self.pending.remove(&uid);
                }
                Err(ApplyFailure::Retry(message)) => {
                    debug!(%uid, %message, "apply will be retried");
                    self.pending.insert(uid, apply);
                }
                Err(ApplyFailure::Rejected(reason, message)) => {
                    warn!(%uid, reason = reason.as_str_name(), %message, "apply rejected");
                    self.pending.remove(&uid);
                    out.push(agent_message(Kind::ApplyRejected(ApplyRejected {
                        origin_uid: uid,
                        revision: apply.revision,
                        reason: reason as i32,
                        message,
                    })));
                }
            }
        }
    }

    async fn try_apply(&self, apply: &ApplyMirror) -> Result<(), ApplyFailure> {
        let rejected = |reason, message: String| Err(ApplyFailure::Rejected(reason, message));
        let job: Job = match serde_json::from_slice(&apply.job) {
            Ok(job) => job,
            Err(e) => return rejected(RejectReason::Invalid, format!("unreadable Job: {e}")),
        };
        let labels = job.metadata.labels.clone().unwrap_or_default();
        if labels.get(ORIGIN_LABEL) != Some(&self.origin)
            || labels.get(ORIGIN_UID_LABEL) != Some(&apply.origin_uid)
        {
            return rejected(
                RejectReason::Invalid,
                format!(
                    "the Job does not carry {ORIGIN_LABEL}={} and {ORIGIN_UID_LABEL}={}",
                    self.origin, apply.origin_uid
                ),
            );
        }
        let (Some(namespace), name) = (job.namespace(), job.name_any()) else {
            return rejected(RejectReason::Invalid, "the Job has no namespace".into());
        };
        let api: Api<Job> = Api::namespaced(self.client.clone(), &namespace);
        let create = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let existing = match api.create(&create, &job).await {
            Ok(_) => {
                info!(uid = %apply.origin_uid, %namespace, %name, revision = apply.revision, "mirror created");
                return Ok(());
            }
            Err(kube::Error::Api(s)) if s.is_already_exists() => match api.get_opt(&name).await {
                Ok(Some(existing)) => existing,
                Ok(None) => {
                    return Err(ApplyFailure::Retry(
                        "the existing Job vanished; trying again".into(),
                    ));
                }
                Err(e) => return Err(apply_failure(&e)),
            },
            Err(e) => return Err(apply_failure(&e)),
        };
        let existing_labels = existing.metadata.labels.clone().unwrap_or_default();
        if existing_labels.get(ORIGIN_LABEL) != Some(&self.origin) {
            return rejected(
                RejectReason::Conflict,
                format!(
                    "Job {namespace}/{name} already exists on this cluster and was not created by jobrelay for origin {} (no matching {ORIGIN_LABEL} label); it is left untouched",
                    self.origin
                ),
            );
        }
        if existing_labels.get(ORIGIN_UID_LABEL) != Some(&apply.origin_uid)
            || existing.metadata.deletion_timestamp.is_some()
        {
            return Err(ApplyFailure::Retry(format!(
                "an older mirror of {namespace}/{name} is still being deleted"
            )));
        }
        if revision_of(&existing) >= apply.revision {
            return Ok(());
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(&name, &params, &Patch::Apply(&job))
            .await
            .map_err(|e| apply_failure(&e))?;
        info!(uid = %apply.origin_uid, %namespace, %name, revision = apply.revision, "mirror updated");
        Ok(())
    }

    /// Starts deleting a mirror at the manager's request.
    pub fn delete(&mut self, delete: DeleteMirror) {
        if let Some(desired) = &mut self.desired {
            desired.remove(&delete.origin_uid);
        }
        self.pending.remove(&delete.origin_uid);
        info!(uid = %delete.origin_uid, namespace = %delete.namespace, name = %delete.name, reason = delete.reason().as_str_name(), "deleting mirror");
        self.begin_delete(delete.origin_uid, delete.namespace, delete.name);
    }

    fn begin_delete(&mut self, uid: String, namespace: String, name: String) {
        self.deleting.entry(uid).or_insert(Deletion {
            namespace,
            name,
            job_gone_since: None,
            last_delete: None,
            pods_deleted: 0,
        });
    }

    /// Moves everything forward: deletions (and their confirmation), pending
    /// applies, and status changes. Messages for the manager go to `out`.
    pub async fn sync(&mut self, out: &mut Vec<AgentMessage>) {
        self.drive_deletions(out).await;
        self.log_progress();
        let pending: Vec<ApplyMirror> = self
            .pending
            .values()
            .filter(|a| !self.deleting.contains_key(&a.origin_uid))
            .cloned()
            .collect();
        self.apply_all(pending, out).await;
        self.report_status(out);
    }

    async fn drive_deletions(&mut self, out: &mut Vec<AgentMessage>) {
        let now = Instant::now();
        let jobs = by_origin_uid(self.jobs.state());
        let pods = by_origin_uid(self.pods.state());
        // First decide, then send everything decided at once.
        let mut job_deletes = Vec::new();
        let mut pod_deletes = Vec::new();
        let mut gone = Vec::new();
        for (uid, deletion) in &mut self.deleting {
            let live_jobs = jobs.get(uid).map(Vec::as_slice).unwrap_or_default();
            let live_pods = pods.get(uid).map(Vec::as_slice).unwrap_or_default();
            if live_jobs.is_empty() {
                deletion.job_gone_since.get_or_insert(now);
            } else if deletion
                .last_delete
                .is_none_or(|at| now - at >= DELETE_RETRY)
            {
                let due: Vec<_> = live_jobs
                    .iter()
                    .filter(|j| j.metadata.deletion_timestamp.is_none())
                    .cloned()
                    .collect();
                if self.budget.try_take_n(due.len()) {
                    deletion.last_delete = Some(now);
                    job_deletes.extend(due);
                }
            }
            if let Some(since) = deletion.job_gone_since
                && now - since >= self.orphan_pod_grace
            {
                for pod in live_pods
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                {
                    if !self.budget.try_take_n(1) {
                        break;
                    }
                    info!(%uid, pod = %pod.name_any(), "Pod outlived its Job; deleting it");
                    pod_deletes.push((uid.clone(), pod.clone()));
                }
            }
            if live_jobs.is_empty() && live_pods.is_empty() {
                gone.push(uid.clone());
            }
        }
        let client = &self.client;
        concurrently(
            job_deletes
                .iter()
                .map(|job| delete_object::<Job>(client, job.as_ref())),
        )
        .await;
        let deleted_pods = concurrently(pod_deletes.into_iter().map(|(uid, pod)| async move {
            delete_object::<Pod>(client, pod.as_ref())
                .await
                .then_some(uid)
        }))
        .await;
        for uid in deleted_pods.into_iter().flatten() {
            if let Some(deletion) = self.deleting.get_mut(&uid) {
                deletion.pods_deleted += 1;
            }
        }
        // The caches said so; the API server must say so too.
        let this = &*self;
        let confirmed = concurrently(gone.into_iter().map(|uid| async move {
            let confirmed = this.confirm_gone(&uid).await;
            (uid, confirmed)
        }))
        .await;
        for (uid, confirmed) in confirmed {
            match confirmed {
                Ok(true) => {
                    let Some(deletion) = self.deleting.remove(&uid) else {
                        continue;
                    };
                    info!(%uid, namespace = %deletion.namespace, name = %deletion.name, pods_deleted = deletion.pods_deleted, "mirror and every Pod gone");
                    self.sent.remove(&uid);
                    self.confirmed_gone += 1;
                    out.push(agent_message(Kind::MirrorGone(MirrorGone {
                        origin_uid: uid,
                        pods_deleted: deletion.pods_deleted,
                    })));
                }
                Ok(false) => {}
                Err(error) => warn!(%uid, %error, "could not confirm the mirror gone"),
            }
        }
    }

    fn log_progress(&mut self) {
        if self.deleting.len() <= BACKLOG
            || self
                .progress_logged
                .is_some_and(|at| at.elapsed() < PROGRESS_EVERY)
        {
            return;
        }
        self.progress_logged = Some(Instant::now());
        info!(
            in_progress = self.deleting.len(),
            gone_so_far = self.confirmed_gone,
            "deletions: working off a backlog"
        );
    }

    async fn confirm_gone(&self, uid: &str) -> Result<bool, kube::Error> {
        let selector = ListParams::default()
            .labels(&format!(
                "{ORIGIN_LABEL}={},{ORIGIN_UID_LABEL}={uid}",
                self.origin
            ))
            .limit(1);
        let jobs = Api::<Job>::all(self.client.clone())
            .list_metadata(&selector)
            .await?;
        if !jobs.items.is_empty() {
            return Ok(false);
        }
        let pods = Api::<Pod>::all(self.client.clone())
            .list_metadata(&selector)
            .await?;
        Ok(pods.items.is_empty())
    }

    fn report_status(&mut self, out: &mut Vec<AgentMessage>) {
        let pods = by_origin_uid(self.pods.state());
        for job in self.jobs.state() {
            let Some(uid) = origin_uid(job.meta()) else {
                continue;
            };
            if self.deleting.contains_key(&uid) {
                continue;
            }
            let pod_count = pods.get(&uid).map_or(0, |p| p.len() as u32);
            let previous = self.sent.get(&uid);
            if previous.is_some_and(|sent| {
                sent.resource_version == job.metadata.resource_version
                    && sent.report.pods == pod_count
            }) {
                continue;
            }
            let report = Report {
                revision: revision_of(&job),
                phase: phase_of(&job),
                status: job
                    .status
                    .as_ref()
                    .and_then(|s| serde_json::to_vec(s).ok())
                    .unwrap_or_default(),
                pods: pod_count,
            };
            if previous.is_none_or(|sent| sent.report != report) {
                out.push(agent_message(Kind::MirrorStatus(MirrorStatus {
                    origin_uid: uid.clone(),
                    revision: report.revision,
                    phase: report.phase as i32,
                    status: report.status.clone(),
                    pods: report.pods,
                })));
            }
            let resource_version = job.metadata.resource_version.clone();
            self.sent.insert(
                uid,
                Sent {
                    resource_version,
                    report,
                },
            );
        }
    }

    /// Counts the mirrors held at the moment it is called (for heartbeats).
    pub fn held_counter(&self) -> impl Fn() -> u32 + Send + 'static {
        let jobs = self.jobs.clone();
        move || jobs.state().len() as u32
    }
}

/// A Job or Pod of this origin found on the worker.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HeldMirror {
    pub origin_uid: String,
    pub namespace: String,
    /// The Job's name; empty for a Pod.
    pub name: String,
}

/// The orphan decision: of what is `held`, the mirrors whose origin UID the
/// manager does not want and that are not `deleting` already, one per origin
/// UID, ordered by it. Of several entries of one UID the Job's is kept, so
/// the deletion is logged with its name.
pub fn orphans(
    held: impl IntoIterator<Item = HeldMirror>,
    desired: &HashSet<String>,
    deleting: impl Fn(&str) -> bool,
) -> Vec<HeldMirror> {
    let mut orphans: Vec<HeldMirror> = held
        .into_iter()
        .filter(|m| !desired.contains(&m.origin_uid) && !deleting(&m.origin_uid))
        .collect();
    orphans.sort_by(|a, b| {
        (&a.origin_uid, a.name.is_empty())
            .cmp(&(&b.origin_uid, b.name.is_empty()))
            .then_with(|| a.cmp(b))
    });
    orphans.dedup_by(|a, b| a.origin_uid == b.origin_uid);
    orphans
}

/// Runs the requests, [`REQUEST_CONCURRENCY`] at a time; their outputs in
/// the order they finished.
async fn concurrently<F: std::future::Future>(
    requests: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    futures::stream::iter(requests)
        .buffer_unordered(REQUEST_CONCURRENCY)
        .collect()
        .await
}

pub fn agent_message(kind: Kind) -> AgentMessage {
    AgentMessage { kind: Some(kind) }
}

fn origin_uid(meta: &kube::api::ObjectMeta) -> Option<String> {
    meta.labels.as_ref()?.get(ORIGIN_UID_LABEL).cloned()
}

fn by_origin_uid<K: Resource>(
    objects: Vec<std::sync::Arc<K>>,
) -> HashMap<String, Vec<std::sync::Arc<K>>> {
    let mut grouped: HashMap<String, Vec<std::sync::Arc<K>>> = HashMap::new();
    for object in objects {
        if let Some(uid) = origin_uid(object.meta()) {
            grouped.entry(uid).or_default().push(object);
        }
    }
    grouped
}

/// Deletes one object with Background propagation and a UID precondition.
/// Returns whether this call deleted it.
async fn delete_object<K>(client: &kube::Client, object: &K) -> bool
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let (Some(namespace), name) = (object.meta().namespace.clone(), object.name_any()) else {
        return false;
    };
    let api: Api<K> = Api::namespaced(client.clone(), &namespace);
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: object.meta().uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => true,
        Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => false,
        Err(error) => {
            warn!(%namespace, %name, %error, "delete failed; will retry");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(uid: &str, namespace: &str, name: &str) -> HeldMirror {
        HeldMirror {
            origin_uid: uid.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn uids(orphans: &[HeldMirror]) -> Vec<&str> {
        orphans.iter().map(|m| m.origin_uid.as_str()).collect()
    }

    #[test]
    fn nothing_is_an_orphan_when_the_manager_wants_everything_held() {
        let desired: HashSet<String> = ["u1", "u2"].map(String::from).into();
        let found = orphans(
            [
                held("u1", "ml", "a"),
                held("u2", "ml", "b"),
                held("u2", "ml", ""),
            ],
            &desired,
            |_| false,
        );
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn what_is_not_desired_and_not_yet_deleting_is_an_orphan_once_in_uid_order() {
        let desired: HashSet<String> = ["u1"].map(String::from).into();
        let found = orphans(
            [
                held("u4", "ml", "d"),
                held("u1", "ml", "a"),
                held("u3", "ml", "c"),
                held("u3", "ml", "c"),
                held("u2", "ml", "b"),
                held("u5", "batch", ""),
            ],
            &desired,
            |uid| uid == "u2",
        );
        assert_eq!(uids(&found), ["u3", "u4", "u5"]);
        assert_eq!(found[0], held("u3", "ml", "c"));
        assert_eq!(
            found[2],
            held("u5", "batch", ""),
            "a Pod alone is an orphan"
        );
    }

    #[test]
    fn of_a_job_and_its_pods_one_entry_is_kept() {
        let found = orphans(
            [
                held("u1", "ml", ""),
                held("u1", "ml", "train"),
                held("u1", "ml", ""),
            ],
            &HashSet::new(),
            |_| false,
        );
        assert_eq!(
            found,
            [held("u1", "ml", "train")],
            "the Job's entry names it"
        );
    }
}
