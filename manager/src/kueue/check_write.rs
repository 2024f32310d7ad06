//! Where jobrelay's answer on one Workload goes: the state and message of
//! its checks, written by server-side apply of their entries in
//! `status.admissionChecks`, once per answer.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;
use tracing::{debug, info};

use super::answers;
use super::check::CheckState;
use super::context::{Context, Error};
use super::types::Workload;

/// The API version of the objects the check's controllers write.
pub(super) fn check_api_version() -> String {
    format!("{}/{}", super::types::GROUP, super::types::VERSION)
}

/// Applies `body` to the status of `name` in `api` (server-side apply, as
/// jobrelay); an error says what was written (`what`).
pub(super) async fn apply_status<K>(
    api: &Api<K>,
    name: &str,
    body: serde_json::Value,
    what: impl FnOnce() -> String,
) -> Result<(), Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params: PatchParams = crate::field_manager::apply();
    match api.patch_status(name, &params, &Patch::Apply(body)).await {
        Ok(_) => Ok(()),
        Err(source) => Err(Error::Kube {
            what: what(),
            source,
        }),
    }
}

/// Where jobrelay's answer on one Workload goes.
pub(super) struct Answer<'a> {
    pub workload: &'a Workload,
    pub checks: &'a [String],
    pub ctx: &'a Context,
}

impl Answer<'_> {
    /// Whether every one of jobrelay's checks on the Workload already
    /// shows `state` and `message`.
    pub fn shown(&self, state: CheckState, message: &str) -> bool {
        self.checks.iter().all(|name| {
            self.workload
                .check(name)
                .is_some_and(|c| c.state == Some(state) && c.message.as_deref() == Some(message))
        })
    }

    /// Sets the state of jobrelay's checks on the Workload (server-side
    /// apply of those entries of `status.admissionChecks`).
    pub async fn write(
        &self,
        state: CheckState,
        message: &str,
        requeue_after: Option<Duration>,
    ) -> Result<Action, Error> {
        let (workload, checks, ctx) = (self.workload, self.checks, self.ctx);
        let uid = workload.uid().unwrap_or_default();
        let answer = answers::Answer {
            state,
            message: message.to_string(),
            reservation: workload.reserved_at().to_string(),
        };
        if !ctx.answers.to_write(&uid, &answer) {
            debug!(
                state = state.as_str(),
                "answer written, not yet seen in the cache"
            );
            return Ok(Action::requeue(answers::ECHO_WITHIN));
        }
        let name = workload.name_any();
        let namespace = workload.namespace().unwrap_or_default();
        let now = Timestamp::now().to_string();
        let entries: Vec<serde_json::Value> = checks
            .iter()
            .map(|check| {
                let mut entry = json!({
                    "name": check, "state": state.as_str(), "message": message,
                    "lastTransitionTime": now,
                });
                if let Some(after) = requeue_after {
                    entry["requeueAfterSeconds"] = json!(after.as_secs());
                }
                entry
            })
            .collect();
        let check = checks.join(", ");
        // The Workload as read: a state decided on a stale copy is refused
        // (409) and decided again.
        let body = json!({
            "apiVersion": check_api_version(),
            "kind": "Workload",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "resourceVersion": workload.resource_version(),
            },
            "status": {"admissionChecks": entries},
        });
        info!(
            check,
            state = state.as_str(),
            message,
            "admission check state"
        );
        let api: Api<Workload> = Api::namespaced(ctx.client.clone(), &namespace);
        apply_status(&api, &name, body, || {
            let state = state.as_str();
            format!("Workload {namespace}/{name}: setting admission check {check} to {state}")
        })
        .await?;
        ctx.answers.written(&uid, answer);
        Ok(Action::await_change())
    }
}
