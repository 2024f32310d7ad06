//! Carrying out the fence ([`crate::fence`]): every mirror that may run Pods
//! is suspended (its revision noted as 0, so the manager applies it again
//! when it wants it to run), or deleted where the worker's Kueue owns its
//! `suspend`; each gets a `Fenced` Event, and the next Hello reports it at
//! revision 0.

use std::sync::Arc;
use std::time::Duration;

use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::v1::MirrorPhase;
use jobrelay_proto::wire::{QUEUE_NAME_LABEL, REVISION_ANNOTATION};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tracing::{info, warn};

use super::deletion::delete_mirror;
use super::{FIELD_MANAGER, Mirrors, concurrently, origin_uid};
use crate::fence::{Action, Held, plan};
use crate::kinds::{self, Mirror, MirrorKind};
use crate::teardown::Deleted;

/// The reporting controller of the agent's Events.
const CONTROLLER: &str = "jobrelay-agent";

impl Mirrors {
    /// Stops every mirror that may run Pods, as [`plan`] says, after the
    /// agent heard no manager for `after`; returns the origin UIDs stopped.
    pub async fn fence(&mut self, after: Duration) -> Vec<String> {
        let mirrors: Vec<Arc<dyn Mirror>> = self
            .objects
            .state()
            .into_iter()
            .filter(|o| kinds::parent(o.object_meta()).is_none())
            .collect();
        let held: Vec<Held> = mirrors
            .iter()
            .filter_map(|mirror| self.held(mirror.as_ref()))
            .collect();
        let recorder = Recorder::new(
            self.client.clone(),
            Reporter {
                controller: CONTROLLER.into(),
                instance: None,
            },
        );
        let client = &self.client;
        let recorder = &recorder;
        let mirrors = &mirrors;
        let done = concurrently(plan(&held).into_iter().filter_map(|(uid, action)| {
            let mirror = mirrors
                .iter()
                .find(|m| origin_uid(m.object_meta()).as_deref() == Some(uid.as_str()))?;
            Some(async move {
                let stopped = stop(client, mirror.as_ref(), action).await;
                if stopped {
                    note(recorder, mirror.as_ref(), action, after).await;
                }
                stopped.then_some(uid)
            })
        }))
        .await;
        let fenced: Vec<String> = done.into_iter().flatten().collect();
        for uid in &fenced {
            self.records.update(uid, |record| record.fenced = true);
        }
        fenced
    }

    /// Pods of `uids` the worker still shows, Terminating ones included.
    pub fn pods_of(&self, uids: &[String]) -> usize {
        self.pods.of(uids).values().map(Vec::len).sum()
    }

    fn held(&self, mirror: &dyn Mirror) -> Option<Held> {
        let meta = mirror.object_meta();
        let uid = origin_uid(meta)?;
        let phase = mirror.mirror_phase();
        let done = self.is_deleting(&uid)
            || matches!(
                phase,
                MirrorPhase::Succeeded | MirrorPhase::Failed | MirrorPhase::Deleting
            );
        let queued_here = meta
            .labels
            .as_ref()
            .is_some_and(|labels| labels.contains_key(QUEUE_NAME_LABEL));
        Some(Held {
            uid,
            done,
            suspended: phase == MirrorPhase::Suspended,
            queued_here,
        })
    }
}

/// Suspends or deletes one mirror; whether it is stopped.
async fn stop(client: &kube::Client, mirror: &dyn Mirror, action: Action) -> bool {
    let meta = mirror.object_meta();
    let (namespace, name) = (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    );
    match action {
        Action::Delete => match delete_mirror(client, mirror).await {
            Deleted::Failed => false,
            Deleted::Now | Deleted::NothingThere => true,
        },
        Action::Suspend => {
            // The UID makes the patch fail on a same-named successor.
            let patch = serde_json::json!({
                "metadata": {"uid": meta.uid, "annotations": {REVISION_ANNOTATION: "0"}},
                "spec": {"suspend": true},
            });
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            let patched = if mirror.kind_name() == JobSet::NAME {
                let api: Api<JobSet> = Api::namespaced(client.clone(), &namespace);
                api.patch(&name, &params, &Patch::Merge(&patch))
                    .await
                    .map(drop)
            } else {
                let api: Api<Job> = Api::namespaced(client.clone(), &namespace);
                api.patch(&name, &params, &Patch::Merge(&patch))
                    .await
                    .map(drop)
            };
            match patched {
                Ok(()) => true,
                Err(error) => {
                    warn!(%namespace, %name, %error, "could not suspend the mirror to fence it");
                    false
                }
            }
        }
    }
}

/// The `Fenced` Event on the mirror, for whoever looks at the worker.
async fn note(recorder: &Recorder, mirror: &dyn Mirror, action: Action, after: Duration) {
    let meta = mirror.object_meta();
    let kind = mirror.kind_name();
    let what = match action {
        Action::Suspend => "suspended",
        Action::Delete => "deleted (the worker's Kueue owns its suspension)",
    };
    let note = format!(
        "no manager heard for {after:?} (the WorkerCluster's fenceAfter): {what}, so it never runs beside a copy the manager places elsewhere once this cluster is Lost; the manager decides what resumes when it is heard again"
    );
    info!(namespace = ?meta.namespace, name = ?meta.name, "mirror fenced: {what}");
    let reference = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some(match kind.group {
            "" => kind.version.to_string(),
            group => format!("{group}/{}", kind.version),
        }),
        kind: Some(kind.kind.into()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        ..Default::default()
    };
    let event = Event {
        type_: EventType::Warning,
        reason: "Fenced".into(),
        note: Some(note),
        action: match action {
            Action::Suspend => "Suspend".into(),
            Action::Delete => "Delete".into(),
        },
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, &reference).await {
        warn!(%error, name = ?meta.name, "could not record the Fenced Event");
    }
}
