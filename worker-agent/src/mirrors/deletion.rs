//! Deleting a mirror: its Job with Background propagation and a UID
//! precondition, then any Pod that outlived its Job past the orphan grace,
//! and `MirrorGone` only once the API server shows neither the Job nor a Pod
//! of its origin UID — Terminating ones count as existing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jobrelay_proto::v1::{AgentMessage, DeleteMirror, MirrorGone, MirrorLost, agent_message::Kind};
use jobrelay_proto::wire::{ORIGIN_LABEL, ORIGIN_UID_LABEL};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Preconditions, PropagationPolicy};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::{Mirrors, Snapshot, agent_message, concurrently};
use crate::namespaces::Verdict;
use crate::teardown::{self, Deleted, Leftover, Next, Progress};

/// How long after a delete without effect it is sent again.
const DELETE_RESEND: Duration = Duration::from_secs(5);
/// Deletions in flight above which progress is logged.
const BACKLOG: usize = 100;
/// How often progress on a backlog is logged.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// A mirror being deleted.
#[derive(Debug)]
pub(super) struct Deletion {
    pub namespace: String,
    pub name: String,
    progress: Progress,
    pods_deleted: u32,
    /// Set when the mirror was lost behind jobrelay's back, not deleted at
    /// the manager's request.
    pub lost: Option<Lost>,
}

/// What the agent tells the manager of a lost mirror.
#[derive(Debug)]
pub(super) struct Lost {
    pub mirror_uid: Option<String>,
    pub observed: String,
    /// Sent to the manager in the current session.
    pub reported: bool,
}

impl Mirrors {
    /// Starts deleting a mirror at the manager's request.
    pub fn delete(&mut self, delete: DeleteMirror) {
        if let Some(desired) = &mut self.desired {
            desired.remove(&delete.origin_uid);
        }
        self.pending.remove(&delete.origin_uid);
        info!(uid = %delete.origin_uid, namespace = %delete.namespace, name = %delete.name, reason = delete.reason().as_str_name(), "deleting mirror");
        self.begin_delete(delete.origin_uid, delete.namespace, delete.name);
    }

    pub(super) fn begin_delete(&mut self, uid: String, namespace: String, name: String) {
        self.begin(uid, namespace, name, None);
    }

    /// Starts deleting what is left of a mirror lost behind jobrelay's back;
    /// the manager is told (again after each reconnect) until it is gone.
    pub(super) fn begin_lost(&mut self, uid: String, namespace: String, name: String, lost: Lost) {
        self.begin(uid, namespace, name, Some(lost));
    }

    fn begin(&mut self, uid: String, namespace: String, name: String, lost: Option<Lost>) {
        self.due.insert(uid.clone());
        self.deleting.entry(uid).or_insert(Deletion {
            namespace,
            name,
            progress: Progress::default(),
            pods_deleted: 0,
            lost,
        });
    }

    /// Tells the manager of every lost mirror it has not heard of in this
    /// session.
    pub(super) fn report_lost(&mut self, out: &mut Vec<AgentMessage>) {
        for (uid, deletion) in &mut self.deleting {
            let Some(lost) = deletion.lost.as_mut().filter(|l| !l.reported) else {
                continue;
            };
            lost.reported = true;
            out.push(agent_message(Kind::MirrorLost(MirrorLost {
                origin_uid: uid.clone(),
                mirror_uid: lost.mirror_uid.clone().unwrap_or_default(),
                observed: lost.observed.clone(),
            })));
        }
    }

    /// Runs one step of the deletion machine (`teardown::step`) for every
    /// mirror being deleted, then sends what the steps decided, 16 requests
    /// at a time, drawing on the deletion pace.
    pub(super) async fn drive_deletions(
        &mut self,
        snapshot: &Snapshot,
        out: &mut Vec<AgentMessage>,
    ) {
        let now = Instant::now();
        let mut job_deletes = Vec::new();
        let mut pod_deletes = Vec::new();
        let mut gone = Vec::new();
        let visited = snapshot.visited(self.deleting.keys(), |uid| self.deleting.contains_key(uid));
        for uid in &visited {
            // A create still out could land after "gone" was confirmed: its
            // answer brings the mirror back to the next pass.
            if self.in_flight.contains(uid) {
                continue;
            }
            let Some(deletion) = self.deleting.get_mut(uid) else {
                continue;
            };
            let jobs = snapshot
                .jobs
                .get(uid)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let pods = snapshot
                .pods
                .get(uid)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let (progress, next) = teardown::step(
                deletion.progress,
                &jobs.iter().map(|j| seen(j.as_ref())).collect::<Vec<_>>(),
                &pods.iter().map(|p| seen(p.as_ref())).collect::<Vec<_>>(),
                now,
                self.orphan_pod_grace,
                DELETE_RESEND,
            );
            match next {
                Next::Wait => deletion.progress = progress,
                Next::ConfirmGone => {
                    deletion.progress = progress;
                    gone.push((deletion.namespace.clone(), uid.clone()));
                }
                // All of a Job's deletes or none, so none waits on a half.
                Next::DeleteJobs(due) if self.deletions.try_take_n(due.len()) => {
                    deletion.progress = progress;
                    job_deletes.extend(due.into_iter().map(|i| Arc::clone(&jobs[i])));
                }
                Next::DeleteJobs(_) => {}
                Next::DeletePods(due) => {
                    deletion.progress = progress;
                    for i in due {
                        if !self.deletions.try_take_n(1) {
                            break;
                        }
                        info!(%uid, pod = %pods[i].name_any(), "Pod outlived its Job; deleting it");
                        pod_deletes.push((uid.clone(), Arc::clone(&pods[i])));
                    }
                }
            }
        }
        let client = &self.client;
        concurrently(
            job_deletes
                .iter()
                .map(|job| delete_object::<Job>(client, job.meta())),
        )
        .await;
        let deleted_pods = concurrently(pod_deletes.into_iter().map(|(uid, pod)| async move {
            (delete_object::<Pod>(client, pod.meta()).await == Deleted::Now).then_some(uid)
        }))
        .await;
        for uid in deleted_pods.into_iter().flatten() {
            if let Some(deletion) = self.deleting.get_mut(&uid) {
                deletion.pods_deleted += 1;
            }
        }
        // The caches said so; the API server must say so too.
        let this = &*self;
        let answers = concurrently(confirmation_batches(gone).into_iter().map(
            |(namespace, uids)| async move {
                let confirmed = this.confirm_gone(&namespace, &uids).await;
                (uids, confirmed)
            },
        ))
        .await;
        for (uids, confirmed) in answers {
            let confirmed = match confirmed {
                Ok(confirmed) => confirmed,
                Err(error) => {
                    warn!(mirrors = uids.len(), %error, "could not confirm the mirrors gone");
                    continue;
                }
            };
            for uid in confirmed {
                let Some(deletion) = self.deleting.remove(&uid) else {
                    continue;
                };
                info!(%uid, namespace = %deletion.namespace, name = %deletion.name, pods_deleted = deletion.pods_deleted, "mirror and every Pod gone");
                self.sent.remove(&uid);
                self.seen.remove(&uid);
                self.confirmed_gone += 1;
                out.push(agent_message(Kind::MirrorGone(MirrorGone {
                    origin_uid: uid,
                    pods_deleted: deletion.pods_deleted,
                })));
            }
        }
    }

    pub(super) fn log_progress(&mut self) {
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

    /// Which of `uids`, mirrors in `namespace`, the API server shows neither
    /// a Job nor a Pod of: two requests for the lot (per namespace the
    /// policy names, when the namespace is not known), each a consistent
    /// read. Nothing of jobrelay's is in a namespace the policy refuses: no
    /// mirror is ever written there.
    async fn confirm_gone(
        &self,
        namespace: &str,
        uids: &[String],
    ) -> Result<Vec<String>, kube::Error> {
        if !namespace.is_empty()
            && matches!(self.policy.decide(namespace, None), Verdict::Refused(_))
        {
            return Ok(uids.to_vec());
        }
        let scopes = match (namespace, self.policy.watched()) {
            ("", Some(names)) => names,
            (namespace, _) => vec![namespace.to_string()],
        };
        let mut uids = uids.to_vec();
        for scope in scopes {
            if uids.is_empty() {
                break;
            }
            uids = self.confirm_gone_in(&scope, &uids).await?;
        }
        Ok(uids)
    }

    async fn confirm_gone_in(
        &self,
        namespace: &str,
        uids: &[String],
    ) -> Result<Vec<String>, kube::Error> {
        let selector = ListParams::default().labels(&selector_of(&self.origin, uids));
        let jobs = within::<Job>(&self.client, namespace)
            .list_metadata(&selector)
            .await?;
        let uids = still_gone(uids, jobs.items.iter().map(|j| &j.metadata));
        if uids.is_empty() {
            return Ok(uids);
        }
        let selector = ListParams::default().labels(&selector_of(&self.origin, &uids));
        let pods = within::<Pod>(&self.client, namespace)
            .list_metadata(&selector)
            .await?;
        Ok(still_gone(&uids, pods.items.iter().map(|p| &p.metadata)))
    }
}

/// `K`s in `namespace`; in every namespace if none is known.
fn within<K>(client: &kube::Client, namespace: &str) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match namespace {
        "" => Api::all(client.clone()),
        namespace => Api::namespaced(client.clone(), namespace),
    }
}

/// At most this many mirrors are confirmed gone by one pair of requests.
const CONFIRM_AT_ONCE: usize = 50;

/// Mirrors to confirm gone, as (namespace, origin UID), in batches of one
/// namespace and at most [`CONFIRM_AT_ONCE`] each: a list with a label
/// selector costs the API server a look at every object in its scope, so one
/// list answers for many mirrors, and within their namespace only.
fn confirmation_batches(
    asked: impl IntoIterator<Item = (String, String)>,
) -> Vec<(String, Vec<String>)> {
    let mut by_namespace: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (namespace, uid) in asked {
        by_namespace.entry(namespace).or_default().push(uid);
    }
    by_namespace
        .into_iter()
        .flat_map(|(namespace, uids)| {
            uids.chunks(CONFIRM_AT_ONCE)
                .map(|chunk| (namespace.clone(), chunk.to_vec()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The label selector of the Jobs and Pods of the mirrors of `uids`.
fn selector_of(origin: &str, uids: &[String]) -> String {
    format!(
        "{ORIGIN_LABEL}={origin},{ORIGIN_UID_LABEL} in ({})",
        uids.join(",")
    )
}

/// The `uids` no object of `listed` is labelled with.
fn still_gone<'a>(
    uids: &[String],
    listed: impl IntoIterator<Item = &'a ObjectMeta>,
) -> Vec<String> {
    let standing: std::collections::HashSet<&str> = listed
        .into_iter()
        .filter_map(|meta| meta.labels.as_ref()?.get(ORIGIN_UID_LABEL))
        .map(String::as_str)
        .collect();
    uids.iter()
        .filter(|uid| !standing.contains(uid.as_str()))
        .cloned()
        .collect()
}

/// What the worker shows of a Job or Pod, for the deletion machine.
fn seen<K: Resource>(object: &K) -> Leftover {
    Leftover {
        terminating: object.meta().deletion_timestamp.is_some(),
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
mod tests {
    use super::*;

    fn uids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("uid-{i}")).collect()
    }

    #[test]
    fn mirrors_are_confirmed_by_namespace_in_batches() {
        let asked = uids(CONFIRM_AT_ONCE + 1)
            .into_iter()
            .map(|uid| ("ml".to_string(), uid))
            .chain([("batch".to_string(), "uid-b".to_string())]);
        let batches = confirmation_batches(asked);
        let sizes: Vec<(&str, usize)> = batches
            .iter()
            .map(|(ns, uids)| (ns.as_str(), uids.len()))
            .collect();
        assert_eq!(sizes, [("batch", 1), ("ml", CONFIRM_AT_ONCE), ("ml", 1)]);
        let all: Vec<&String> = batches.iter().flat_map(|(_, uids)| uids).collect();
        assert_eq!(all.len(), CONFIRM_AT_ONCE + 2, "every mirror asked once");
        assert!(confirmation_batches([]).is_empty());
    }

    #[test]
    fn one_selector_names_every_mirror_of_the_batch_and_the_origin() {
        assert_eq!(
            selector_of("east", &uids(2)),
            format!("{ORIGIN_LABEL}=east,{ORIGIN_UID_LABEL} in (uid-0,uid-1)")
        );
    }

    #[test]
    fn a_mirror_is_gone_only_while_nothing_listed_carries_its_uid() {
        let labelled = |uid: &str| ObjectMeta {
            labels: Some([(ORIGIN_UID_LABEL.to_string(), uid.to_string())].into()),
            ..ObjectMeta::default()
        };
        let listed = [labelled("uid-1"), labelled("uid-1"), ObjectMeta::default()];
        assert_eq!(still_gone(&uids(3), &listed), ["uid-0", "uid-2"]);
        assert_eq!(still_gone(&uids(2), []), ["uid-0", "uid-1"]);
    }
}
