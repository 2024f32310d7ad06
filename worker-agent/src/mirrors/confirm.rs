//! Confirming a deleted mirror gone: the caches showed neither it, nor a
//! child of it (a JobSet's Job), nor a Pod of its origin UID, and the API
//! server, asked with a consistent list per kind and namespace for up to 50
//! mirrors at once, agrees. Only then is `MirrorGone` sent. JobSets are
//! asked after only for a batch that may hold one: mirrors of Jobs, as the
//! manager named them, are asked after as Jobs and Pods. A read refused or
//! failed confirms nothing, and a namespace outside the agent's watches is
//! read all the same (see `reads`).

use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::kinds::{JOB, KindName};
use jobrelay_proto::v1::AgentMessage;
use jobrelay_proto::wire::{ORIGIN_LABEL, ORIGIN_UID_LABEL};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::{Api, ListParams, ObjectMeta};
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use super::mirror::Event;
use super::reads::{Confirmation, Read, Scope, confirmation, read_failure, scope_of};
use super::{Mirrors, concurrently};
use crate::kinds::MirrorKind;

impl Mirrors {
    /// Asks the API server whether the mirrors the caches show gone are;
    /// reports `MirrorGone` for each it confirms. A mirror whose namespace
    /// could not be read stays unconfirmed, logged, and is asked after
    /// again on a later pass.
    pub(super) async fn confirm_gone_and_report(
        &mut self,
        gone: Vec<Gone>,
        out: &mut Vec<AgentMessage>,
    ) {
        // The caches said so; the API server must say so too.
        let this = &*self;
        let answers = concurrently(confirmation_batches(gone).into_iter().map(
            |batch| async move {
                let confirmations = this.confirm_gone(&batch).await;
                (batch.namespace, confirmations)
            },
        ))
        .await;
        for (namespace, confirmations) in answers {
            let mut unknown = (0, None);
            for (uid, confirmation) in confirmations {
                match confirmation {
                    Confirmation::Gone => self.on(&uid, Event::Gone, out),
                    Confirmation::Standing => {}
                    Confirmation::Unknown(why) => {
                        unknown.0 += 1;
                        unknown.1.get_or_insert(why);
                    }
                }
            }
            if let (mirrors, Some(reason)) = unknown {
                self.log_unconfirmed(&namespace, mirrors, &reason);
            }
        }
    }

    /// Logs that `mirrors` of `namespace` are not confirmed gone, and why:
    /// as a warning once per namespace every [`UNCONFIRMED_LOGGED_EVERY`],
    /// not on every pass while a namespace cannot be read.
    pub(super) fn log_unconfirmed(&mut self, namespace: &str, mirrors: usize, reason: &str) {
        let now = Instant::now();
        let last = self.unconfirmed_logged.get(namespace).copied();
        if !log_due(last, now, UNCONFIRMED_LOGGED_EVERY) {
            debug!(%namespace, mirrors, %reason, "could not confirm the mirrors gone; asking again on a later pass");
            return;
        }
        self.unconfirmed_logged.insert(namespace.to_string(), now);
        warn!(%namespace, mirrors, %reason, "could not confirm the mirrors gone; asking again on a later pass");
    }

    /// Whether each mirror of `batch` is gone: the API server shows neither
    /// a Job nor a Pod (nor a JobSet) of it, in a read that covers its
    /// namespace — whether the agent's watches do or not — and succeeded
    /// ([`confirmation`]). Only where jobrelay never writes (a
    /// system namespace, the agent's own) is nothing read.
    async fn confirm_gone(&self, batch: &Batch) -> Vec<(String, Confirmation)> {
        let scope = scope_of(&self.policy, &batch.namespace);
        let listed = match scope {
            Scope::NeverWritten => None,
            Scope::Watched | Scope::Unwatched => Some(
                self.still_gone_in_scope(batch)
                    .await
                    .map_err(|error| read_failure(&error)),
            ),
        };
        batch
            .uids
            .iter()
            .map(|uid| {
                let read = listed.as_ref().map(|listed| match listed {
                    Ok(gone) if gone.contains(uid) => Read::Nothing,
                    Ok(_) => Read::Standing,
                    Err(failure) => Read::Failed(failure.clone()),
                });
                let confirmation = confirmation(&batch.namespace, scope, read.as_ref());
                (uid.clone(), confirmation)
            })
            .collect()
    }

    /// Which mirrors of `batch` the API server shows neither a Job nor a
    /// Pod (nor a JobSet) of: two or three requests for the lot (per
    /// namespace the policy names, when the namespace is not known), each a
    /// consistent read.
    async fn still_gone_in_scope(&self, batch: &Batch) -> Result<Vec<String>, kube::Error> {
        let Batch {
            namespace,
            jobs_only,
            uids,
        } = batch;
        let scopes = match (namespace.as_str(), self.policy.watched()) {
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

/// How often a namespace whose mirrors cannot be confirmed gone is logged
/// as a warning again.
const UNCONFIRMED_LOGGED_EVERY: Duration = Duration::from_secs(30);

/// Whether a warning last logged at `last` is due again at `now`.
fn log_due(last: Option<Instant>, now: Instant, every: Duration) -> bool {
    last.is_none_or(|at| now.saturating_duration_since(at) >= every)
}

/// At most this many mirrors are confirmed gone by one pair of requests.
const CONFIRM_AT_ONCE: usize = 50;

/// A mirror to ask the API server about: one the caches show gone, to be
/// confirmed, or one being deleted outside the watches (`direct`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Gone {
    pub namespace: String,
    /// Its kind, if the manager named it.
    pub kind: Option<KindName>,
    pub uid: String,
}

/// Mirrors confirmed gone by one list per kind.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Batch {
    pub namespace: String,
    /// Every mirror of the batch is a Job's: no JobSet list is needed.
    pub jobs_only: bool,
    pub uids: Vec<String>,
}

/// Mirrors to confirm gone, in batches of one namespace, of Jobs' mirrors
/// or not, and at most [`CONFIRM_AT_ONCE`] each: a list with a label
/// selector costs the API server a look at every object in its scope, so one
/// list answers for many mirrors, and within their namespace only.
pub(super) fn confirmation_batches(asked: impl IntoIterator<Item = Gone>) -> Vec<Batch> {
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
pub(super) fn selector_of(origin: &str, uids: &[String]) -> String {
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
