//! Writing one mirror to the worker: create the Job the manager sent, or
//! update this origin's mirror to its newer revision, never touching a
//! same-named Job that is not this origin's. A revision of a mirror the
//! agent's cache shows is applied in one request, on condition that the
//! mirror is still the one the cache shows (its resourceVersion); else, and
//! for a new mirror, the Job is created, or read and then updated.

use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::kinds::KindName;
use jobrelay_proto::v1::{ApplyMirror, RejectReason};
use jobrelay_proto::wire::{
    MANAGER_INSTANCE_LABEL, ORIGIN_LABEL, ORIGIN_UID_LABEL, QUEUE_NAME_LABEL, REVISION_ANNOTATION,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tracing::{debug, info};

use std::sync::Arc;

use super::FIELD_MANAGER;
use super::reads::resent_outside_policy;
use crate::kinds::{self, Mirror, MirrorKind, Prepare};
use crate::namespaces::{NamespacePolicy, NamespaceVerdict};
use crate::report::{ApplyFailure, apply_failure, revision_of};

/// Creates the mirror `apply` carries, or updates this origin's one to its
/// revision, labelled with the manager `instance` of the session; refuses a
/// kind the agent does not mirror. `cached` holds the cache's objects of the
/// mirror's origin UID.
pub(super) async fn try_apply(
    client: &kube::Client,
    session: (&str, &str),
    policy: &NamespacePolicy,
    served: &[KindName],
    (apply, cached): (&ApplyMirror, &[Arc<dyn Mirror>]),
) -> Result<(), ApplyFailure> {
    let kind = apply.kind.as_ref();
    if Job::NAME.is(kind) {
        write::<Job>(client, session, policy, apply, cached).await
    } else if JobSet::NAME.is(kind) && served.contains(&JobSet::NAME) {
        write::<JobSet>(client, session, policy, apply, cached).await
    } else {
        Err(kinds::not_mirrored(kind, served))
    }
}

async fn write<K: MirrorKind + 'static>(
    client: &kube::Client,
    (origin, instance): (&str, &str),
    policy: &NamespacePolicy,
    apply: &ApplyMirror,
    cached: &[Arc<dyn Mirror>],
) -> Result<(), ApplyFailure> {
    let mut job: K = read_mirror(origin, instance, apply)?;
    let (Some(namespace), name) = (job.namespace(), job.name_any()) else {
        return refused(
            RejectReason::Invalid,
            format!("the {} has no namespace", K::NAME.kind),
        );
    };
    if let Err(refused) = admitted(client, policy, &namespace).await {
        return outside_policy::<K>(
            client,
            policy,
            (origin, apply),
            (&namespace, &name),
            refused,
        )
        .await;
    }
    let api: Api<K> = Api::namespaced(client.clone(), &namespace);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let cached = cached
        .iter()
        .find_map(|m| m.as_any().downcast_ref::<K>())
        .filter(|c| c.namespace() == job.namespace() && c.name_any() == name);
    if let Some(version) = update_in_place(cached, &job, origin, apply) {
        let mut pinned = job.clone();
        pinned.meta_mut().resource_version = Some(version);
        match api.patch(&name, &params, &Patch::Apply(&pinned)).await {
            Ok(_) => {
                info!(uid = %apply.origin_uid, %namespace, %name, revision = apply.revision, "mirror updated");
                return Ok(());
            }
            Err(error) => {
                debug!(%error, %name, "the cached mirror is out of date; reading it");
            }
        }
    }
    let Some(existing) = create_or_find(&api, &job).await? else {
        info!(uid = %apply.origin_uid, %namespace, %name, revision = apply.revision, "mirror created");
        return Ok(());
    };
    ours_to_update(&existing, origin, apply)?;
    if revision_of(existing.meta()) >= apply.revision {
        return Ok(());
    }
    if existing.is_finished() {
        // Its spec is left as it ran: the worker's Job controller no
        // longer acts on it, and a finished Job refuses what a suspension
        // writes (its start time). The revision is recorded, so the
        // manager knows the worker holds it, and the outcome stands.
        let annotations = serde_json::json!({
            "metadata": {"annotations": {REVISION_ANNOTATION: apply.revision.to_string()}}
        });
        api.patch(&name, &merge_params(), &Patch::Merge(&annotations))
            .await
            .map_err(|e| apply_failure(&e))?;
        info!(uid = %apply.origin_uid, %namespace, %name, revision = apply.revision, "mirror already finished; revision recorded, its spec left as it ran");
        return Ok(());
    }
    let queued_here = keep_what_the_workers_kueue_owns(&mut job, &existing);
    if !queued_here {
        prepare(&api, &name, K::before_update(&existing, &job)).await?;
    }
    api.patch(&name, &params, &Patch::Apply(&job))
        .await
        .map_err(|e| apply_failure(&e))?;
    info!(uid = %apply.origin_uid, %namespace, %name, revision = apply.revision, "mirror updated");
    Ok(())
}

fn refused<T>(reason: RejectReason, message: String) -> Result<T, ApplyFailure> {
    Err(ApplyFailure::Refused(reason, message))
}

/// Merge patches recorded under the agent's field manager.
fn merge_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}

/// The object `apply` carries, if it is this origin's mirror of the object
/// it names, labelled with the manager `instance` of the session.
fn read_mirror<K: MirrorKind>(
    origin: &str,
    instance: &str,
    apply: &ApplyMirror,
) -> Result<K, ApplyFailure> {
    let mut job: K = match serde_json::from_slice(&apply.object) {
        Ok(job) => job,
        Err(e) => {
            return refused(
                RejectReason::Invalid,
                format!("unreadable {}: {e}", K::NAME.kind),
            );
        }
    };
    let labels = job.labels().clone();
    if labels.get(ORIGIN_LABEL).map(String::as_str) != Some(origin)
        || labels.get(ORIGIN_UID_LABEL) != Some(&apply.origin_uid)
    {
        return refused(
            RejectReason::Invalid,
            format!(
                "the {} does not carry {ORIGIN_LABEL}={} and {ORIGIN_UID_LABEL}={}",
                K::NAME.kind,
                origin,
                apply.origin_uid
            ),
        );
    }
    if !instance.is_empty() {
        job.labels_mut()
            .insert(MANAGER_INSTANCE_LABEL.into(), instance.into());
    }
    Ok(job)
}

/// The resourceVersion to apply `desired` against when the cached copy of
/// the mirror shows that applying it is all the update takes: this origin's
/// mirror of the same object, not being deleted, at an older revision,
/// unfinished, not queued in the worker's own Kueue (whose fields the cache
/// does not keep), with nothing to write first.
fn update_in_place<K: MirrorKind>(
    cached: Option<&K>,
    desired: &K,
    origin: &str,
    apply: &ApplyMirror,
) -> Option<String> {
    let cached = cached?;
    let plain = ours_to_update(cached, origin, apply).is_ok()
        && revision_of(cached.meta()) < apply.revision
        && !cached.is_finished()
        && !desired.labels().contains_key(QUEUE_NAME_LABEL)
        && K::before_update(cached, desired).is_empty();
    plain.then(|| cached.resource_version()).flatten()
}

/// Creates `job`; `None` once created, else the Job of that name already
/// on the worker.
async fn create_or_find<K: MirrorKind>(api: &Api<K>, job: &K) -> Result<Option<K>, ApplyFailure> {
    let create = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    match api.create(&create, job).await {
        Ok(_) => Ok(None),
        Err(kube::Error::Api(s)) if s.is_already_exists() => {
            match api.get_opt(&job.name_any()).await {
                Ok(Some(existing)) => Ok(Some(existing)),
                Ok(None) => Err(ApplyFailure::Wait(
                    "the existing Job vanished; trying again".into(),
                )),
                Err(e) => Err(apply_failure(&e)),
            }
        }
        Err(e) => Err(apply_failure(&e)),
    }
}

/// Whether `existing` is this origin's mirror of the same manager Job, not
/// being deleted: never another's Job, never an older mirror's.
fn ours_to_update<K: MirrorKind>(
    existing: &K,
    origin: &str,
    apply: &ApplyMirror,
) -> Result<(), ApplyFailure> {
    let (namespace, name) = (
        existing.namespace().unwrap_or_default(),
        existing.name_any(),
    );
    let existing_labels = existing.labels();
    if existing_labels.get(ORIGIN_LABEL).map(String::as_str) != Some(origin) {
        return refused(
            RejectReason::Conflict,
            format!(
                "{} {namespace}/{name} already exists on this cluster and was not created by jobrelay for origin {} (no matching {ORIGIN_LABEL} label); it is left untouched",
                K::NAME.kind,
                origin
            ),
        );
    }
    if existing_labels.get(ORIGIN_UID_LABEL) != Some(&apply.origin_uid)
        || existing.meta().deletion_timestamp.is_some()
    {
        return Err(ApplyFailure::Wait(format!(
            "an older mirror of {namespace}/{name} is still being deleted"
        )));
    }
    Ok(())
}

/// Writes what must come before a new revision of a running mirror.
async fn prepare<K: MirrorKind>(
    api: &Api<K>,
    name: &str,
    steps: Vec<Prepare>,
) -> Result<(), ApplyFailure> {
    for step in steps {
        let (patch, status) = match step {
            Prepare::Suspend => (serde_json::json!({"spec": {"suspend": true}}), false),
            Prepare::ClearStartTime => (serde_json::json!({"status": {"startTime": null}}), true),
        };
        let params = merge_params();
        let patched = match status {
            false => api.patch(name, &params, &Patch::Merge(&patch)).await,
            true => api.patch_status(name, &params, &Patch::Merge(&patch)).await,
        };
        patched.map_err(|e| preparation_failure(apply_failure(&e)))?;
        debug!(%name, ?step, "mirror prepared for a suspended revision");
    }
    Ok(())
}

/// What a refused preparation step stands for. The agent writes the step
/// itself, so the worker finds it invalid only when the mirror changed
/// since it was read: it finished (a finished Job must keep its start
/// time). That clears on the next try, which reads the mirror again and,
/// finding it finished, records the revision and leaves its outcome
/// standing. Any other refusal stands.
fn preparation_failure(failure: ApplyFailure) -> ApplyFailure {
    match failure {
        ApplyFailure::Refused(RejectReason::Invalid, message) => ApplyFailure::Wait(format!(
            "the mirror changed while it was prepared for a suspended revision ({message}); reading it again"
        )),
        other => other,
    }
}

/// A mirror queued in this cluster's own Kueue (it carries a queue name) has
/// its `suspend`, pod template and queue name owned by that Kueue once
/// created: a later revision keeps what the cluster shows for them, so it
/// neither fights Kueue's admission nor touches a started Job's template.
/// True when the mirror is such a one.
fn keep_what_the_workers_kueue_owns<K: MirrorKind>(desired: &mut K, existing: &K) -> bool {
    let queue = |mirror: &K| mirror.labels().get(QUEUE_NAME_LABEL).cloned();
    if queue(desired).is_none() {
        return false;
    }
    if let Some(existing_queue) = queue(existing) {
        desired
            .labels_mut()
            .insert(QUEUE_NAME_LABEL.into(), existing_queue);
    }
    K::keep_what_kueue_owns(desired, existing);
    true
}

/// Whether the namespace policy lets a mirror into `namespace`, reading the
/// namespace's labels only when its selector must tell.
async fn admitted(
    client: &kube::Client,
    policy: &NamespacePolicy,
    namespace: &str,
) -> Result<(), ApplyFailure> {
    let verdict = match policy.decide(namespace, None) {
        NamespaceVerdict::NeedsLabels => match Api::<Namespace>::all(client.clone())
            .get_opt(namespace)
            .await
        {
            Ok(Some(found)) => policy.decide(namespace, Some(found.labels())),
            Ok(None) => {
                return Err(ApplyFailure::Refused(
                    RejectReason::NamespaceMissing,
                    format!("namespace {namespace} does not exist on the worker"),
                ));
            }
            Err(error) => return Err(apply_failure(&error)),
        },
        verdict => verdict,
    };
    match verdict {
        NamespaceVerdict::Allowed => Ok(()),
        NamespaceVerdict::Refused(message) => {
            tracing::warn!(%namespace, policy = %policy.describe(), "a mirror refused: its namespace is outside the namespace policy");
            Err(ApplyFailure::Refused(
                RejectReason::NamespaceNotAllowed,
                message,
            ))
        }
        NamespaceVerdict::NeedsLabels => Err(ApplyFailure::Refused(
            RejectReason::NamespaceNotAllowed,
            format!("namespace {namespace}: its labels could not be read"),
        )),
    }
}

/// The answer to an apply into `namespace` that `admitted` refused: a
/// mirror of this origin and origin UID there already (written while an
/// earlier policy named the namespace) is left as it runs, and the apply
/// answered as taken; else the refusal stands (see
/// [`resent_outside_policy`]). Where jobrelay never writes (a system
/// namespace, the agent's own), nothing is read.
async fn outside_policy<K: MirrorKind>(
    client: &kube::Client,
    policy: &NamespacePolicy,
    (origin, apply): (&str, &ApplyMirror),
    (namespace, name): (&str, &str),
    refused: ApplyFailure,
) -> Result<(), ApplyFailure> {
    let refusal = match refused {
        ApplyFailure::Refused(RejectReason::NamespaceNotAllowed, message)
            if !policy.never_allowed(namespace) =>
        {
            message
        }
        other => return Err(other),
    };
    let found = match Api::<K>::namespaced(client.clone(), namespace)
        .get_metadata_opt(name)
        .await
    {
        Ok(found) => Ok(found.map(|meta| meta.metadata)),
        Err(error) => Err(apply_failure(&error)),
    };
    let answer = resent_outside_policy(namespace, refusal, (origin, &apply.origin_uid), found);
    if answer.is_ok() {
        info!(uid = %apply.origin_uid, %namespace, %name, revision = apply.revision, "mirror held in a namespace outside the agent's namespace policy; left as it runs, not updated");
    }
    answer
}

#[cfg(test)]
#[path = "write_tests.rs"]
mod tests;
