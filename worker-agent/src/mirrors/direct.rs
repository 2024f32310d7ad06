//! Mirrors being deleted in a namespace the agent's watches do not cover:
//! one written while an earlier policy named the namespace, which the
//! agent (restarted with a narrower policy) still holds. Its caches show
//! nothing of them, so each pass that looks at them reads their Jobs,
//! JobSets and Pods from the API server, one consistent list per kind and
//! namespace, and the deletion machine steps on what that read shows: the
//! mirror is deleted (Background, UID precondition), then its stray Pods,
//! and it is confirmed gone only by a read that shows nothing of it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jobrelay_kinds::jobset::JobSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::{Api, ListParams};

use super::confirm::{Batch, Gone, confirmation_batches, selector_of};
use super::reads::{Scope, read_failure, scope_of, unread};
use super::visit::Visit;
use super::{Mirrors, Snapshot, by_origin_uid, concurrently};
use crate::kinds::{Mirror, MirrorKind};

/// What the API server showed of the mirrors outside the watches.
pub(super) struct Direct {
    /// Their objects and Pods, as the caches' snapshot holds them.
    pub snapshot: Snapshot,
    /// The mirrors whose namespace was read: a mirror not among them was
    /// not seen at all, which says nothing of it.
    pub read: HashSet<String>,
    /// The namespaces that could not be read: how many mirrors, and why.
    pub unread: Vec<(String, usize, String)>,
}

/// The objects and Pods of some mirrors, by origin UID.
type Listed = (
    HashMap<String, Vec<Arc<dyn Mirror>>>,
    HashMap<String, Vec<Arc<Pod>>>,
);

impl Mirrors {
    /// The mirrors being deleted that `snapshot` looks at whose namespace
    /// the agent's watches do not cover.
    pub(super) fn unwatched_deletions(&mut self, snapshot: &Snapshot) -> Vec<Gone> {
        let records = &self.records;
        let visited = snapshot.visited(records.deleting(), |uid| records.is_deleting(uid));
        let mut unwatched = Vec::new();
        for uid in visited {
            let Some(deletion) = self.records.deletion_to_drive(&uid) else {
                continue;
            };
            if scope_of(&self.policy, &deletion.namespace) == Scope::Unwatched {
                unwatched.push(Gone {
                    namespace: deletion.namespace.clone(),
                    kind: deletion.kind,
                    uid,
                });
            }
        }
        unwatched
    }

    /// Reads what the API server shows of the mirrors `unwatched` names, up
    /// to 50 mirrors per request. A namespace whose read failed (the agent
    /// may no longer read there, say) is left out, with why: its mirrors
    /// wait for a later pass.
    pub(super) async fn read_directly(&self, unwatched: Vec<Gone>) -> Direct {
        let mut direct = Direct {
            snapshot: Snapshot {
                visit: Visit::These(HashSet::new()),
                objects: HashMap::new(),
                pods: HashMap::new(),
            },
            read: HashSet::new(),
            unread: Vec::new(),
        };
        if unwatched.is_empty() {
            return direct;
        }
        let answers = concurrently(confirmation_batches(unwatched).into_iter().map(
            |batch| async move {
                let listed = self.list_directly(&batch).await;
                (batch, listed)
            },
        ))
        .await;
        for (batch, listed) in answers {
            match listed {
                Ok((objects, pods)) => {
                    direct.snapshot.objects.extend(objects);
                    direct.snapshot.pods.extend(pods);
                    direct.read.extend(batch.uids);
                }
                Err(error) => {
                    let reason = unread(&batch.namespace, Scope::Unwatched, &read_failure(&error));
                    direct
                        .unread
                        .push((batch.namespace, batch.uids.len(), reason));
                }
            }
        }
        direct
    }

    /// Every object (JobSets where the batch may hold one, Jobs) and Pod
    /// of the mirrors of `batch` in its namespace, by their metadata.
    async fn list_directly(&self, batch: &Batch) -> Result<Listed, kube::Error> {
        let selector = ListParams::default().labels(&selector_of(&self.origin, &batch.uids));
        let mut objects: Vec<Arc<dyn Mirror>> = Vec::new();
        if !batch.jobs_only && self.objects.served().contains(&JobSet::NAME) {
            let jobsets = self.api::<JobSet>(batch).list_metadata(&selector).await?;
            objects.extend(jobsets.items.into_iter().map(|meta| {
                Arc::new(JobSet {
                    metadata: meta.metadata,
                    ..JobSet::default()
                }) as Arc<dyn Mirror>
            }));
        }
        let jobs = self.api::<Job>(batch).list_metadata(&selector).await?;
        objects.extend(jobs.items.into_iter().map(|meta| {
            Arc::new(Job {
                metadata: meta.metadata,
                ..Job::default()
            }) as Arc<dyn Mirror>
        }));
        let pods = self.api::<Pod>(batch).list_metadata(&selector).await?;
        let pods: Vec<Arc<Pod>> = pods
            .items
            .into_iter()
            .map(|meta| {
                Arc::new(Pod {
                    metadata: meta.metadata,
                    ..Pod::default()
                })
            })
            .collect();
        Ok((
            by_origin_uid(objects, |o| o.object_meta()),
            by_origin_uid(pods, |p| p.meta()),
        ))
    }

    fn api<K>(&self, batch: &Batch) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        Api::namespaced(self.client.clone(), &batch.namespace)
    }
}
