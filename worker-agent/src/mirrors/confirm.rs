//! Confirming a deleted mirror gone: the caches showed neither it, nor a
//! child of it (a JobSet's Job), nor a Pod of its origin UID, and the API
//! server, asked with a consistent list per kind and namespace for up to 50
//! mirrors at once, agrees. Only then is `MirrorGone` sent. JobSets are
//! asked after only for a batch that may hold one: mirrors of Jobs, as the
//! manager named them, are asked after as Jobs and Pods.

use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::kinds::{JOB, KindName};
use jobrelay_proto::v1::AgentMessage;
use jobrelay_proto::wire::{ORIGIN_LABEL, ORIGIN_UID_LABEL};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::{Api, ListParams, ObjectMeta};
use tracing::warn;

use super::mirror::Event;
use super::{Mirrors, concurrently};
use crate::kinds::MirrorKind;
use crate::namespaces::NamespaceVerdict;

impl Mirrors {
    /// Asks the API server whether the mirrors the caches show gone are;
    /// reports `MirrorGone` for each it confirms.
    pub(super) async fn confirm_gone_and_report(
        &mut self,
        gone: Vec<Gone>,
        out: &mut Vec<AgentMessage>,
    ) {
        // The caches said so; the API server must say so too.
        let this = &*self;
        let answers = concurrently(confirmation_batches(gone).into_iter().map(
            |batch| async move {
                let confirmed = this.confirm_gone(&batch).await;
                (batch.uids, confirmed)
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
                self.on(&uid, Event::Gone, out);
            }
        }
    }

    /// Which mirrors of `batch` the API server shows neither a Job nor a
    /// Pod (nor a JobSet) of: two or three requests for the lot (per
    /// namespace the policy names, when the namespace is not known), each a
    /// consistent read. Nothing of jobrelay's is in a namespace the policy
    /// refuses: no mirror is ever written there.
    async fn confirm_gone(&self, batch: &Batch) -> Result<Vec<String>, kube::Error> {
        let Batch {
            namespace,
            jobs_only,
            uids,
        } = batch;
        let namespace = namespace.as_str();
        if !namespace.is_empty()
            && matches!(
                self.policy.decide(namespace, None),
                NamespaceVerdict::Refused(_)
            )
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
            uids = self.confirm_gone_in(&scope, *jobs_only, &uids).await?;
        }
        Ok(uids)
    }

    async fn confirm_gone_in(
        &self,
        namespace: &str,
        jobs_only: bool,
        uids: &[String],
    ) -> Result<Vec<String>, kube::Error> {
        let mut uids = uids.to_vec();
        if !jobs_only && self.objects.served().contains(&JobSet::NAME) {
            let selector = ListParams::default().labels(&selector_of(&self.origin, &uids));
            let jobsets = within::<JobSet>(&self.client, namespace)
                .list_metadata(&selector)
                .await?;
            uids = still_gone(&uids, jobsets.items.iter().map(|j| &j.metadata));
        }
        if uids.is_empty() {
            return Ok(uids);
        }
        // Jobs: the mirrors of Jobs, and the children of every other kind.
        let selector = ListParams::default().labels(&selector_of(&self.origin, &uids));
        let jobs = within::<Job>(&self.client, namespace)
            .list_metadata(&selector)
            .await?;
        let uids = still_gone(&uids, jobs.items.iter().map(|j| &j.metadata));
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

/// A mirror the caches show gone, to be confirmed on the API server.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Gone {
    pub namespace: String,
    /// Its kind, if the manager named it.
    pub kind: Option<KindName>,
    pub uid: String,
}

/// Mirrors confirmed gone by one list per kind.
#[derive(Debug, Clone, PartialEq)]
struct Batch {
    namespace: String,
    /// Every mirror of the batch is a Job's: no JobSet list is needed.
    jobs_only: bool,
    uids: Vec<String>,
}

/// Mirrors to confirm gone, in batches of one namespace, of Jobs' mirrors
/// or not, and at most [`CONFIRM_AT_ONCE`] each: a list with a label
/// selector costs the API server a look at every object in its scope, so one
/// list answers for many mirrors, and within their namespace only.
fn confirmation_batches(asked: impl IntoIterator<Item = Gone>) -> Vec<Batch> {
    let mut by_scope: std::collections::BTreeMap<(String, bool), Vec<String>> = Default::default();
    for Gone {
        namespace,
        kind,
        uid,
    } in asked
    {
        let jobs_only = kind == Some(JOB);
        by_scope
            .entry((namespace, jobs_only))
            .or_default()
            .push(uid);
    }
    by_scope
        .into_iter()
        .flat_map(|((namespace, jobs_only), uids)| {
            uids.chunks(CONFIRM_AT_ONCE)
                .map(|chunk| Batch {
                    namespace: namespace.clone(),
                    jobs_only,
                    uids: chunk.to_vec(),
                })
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

#[cfg(test)]
#[path = "confirm_tests.rs"]
mod tests;
