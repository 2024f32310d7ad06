//! The leader's mark on its own Pod: label [`LEADER_LABEL`]`=true` while it
//! leads and serves agents, none otherwise. The Service agents dial selects
//! that label, so its endpoints follow leadership while every replica stays
//! Ready (readiness means "caches synced", never "leading": a leader-only
//! readiness would stop a rollout and every eviction of a two-replica
//! Deployment).
//!
//! The label is written outside the fence: a replica clears it at start
//! (a mark left by an earlier container of the same Pod) and when it stops,
//! whether or not it leads.

use std::time::Duration;

use jobrelay_proto::wire::LEADER_LABEL;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch};
use serde_json::{Value, json};
use tokio::sync::watch;
use tracing::{info, warn};

/// Pause before a failed label write is tried again.
const RETRY: Duration = Duration::from_secs(2);

/// The merge patch that marks (or unmarks) a Pod as the leader's.
pub fn patch(leading: bool) -> Value {
    let value = match leading {
        true => json!("true"),
        false => Value::Null,
    };
    json!({ "metadata": { "labels": { LEADER_LABEL: value } } })
}

/// This replica's own Pod, whose leader label it keeps.
#[derive(Clone)]
pub struct PodLabel {
    pods: Api<Pod>,
    name: String,
}

impl PodLabel {
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        Self {
            pods: Api::namespaced(client, namespace),
            name: name.to_string(),
        }
    }

    /// Sets the label as `leading` says; whether it was written. A failure
    /// is logged, not returned.
    pub async fn mark(&self, leading: bool) -> bool {
        let written = self
            .pods
            .patch(
                &self.name,
                &crate::field_manager::patch(),
                &Patch::Merge(patch(leading)),
            )
            .await;
        match written {
            Ok(_) => {
                info!(pod = %self.name, leading, "leader label written");
                true
            }
            Err(error) => {
                warn!(pod = %self.name, leading, %error, "cannot write the leader label; retrying");
                false
            }
        }
    }

    /// Follows `leading`: the label is written now and at every change, and
    /// a failed write is tried again (until it is written, agents cannot
    /// reach this leader through the Service), until the sender is gone.
    pub async fn follow(self, mut leading: watch::Receiver<bool>) {
        loop {
            let now = *leading.borrow_and_update();
            let retry = next_try(self.mark(now).await);
            tokio::select! {
                changed = leading.changed() => if changed.is_err() { return },
                () = sleep_or_never(retry) => {}
            }
        }
    }
}

/// How long after a write the label is written again: never once it was
/// written, soon when it failed.
pub fn next_try(written: bool) -> Option<Duration> {
    (!written).then_some(RETRY)
}

async fn sleep_or_never(after: Option<Duration>) {
    match after {
        Some(after) => tokio::time::sleep(after).await,
        None => futures::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_is_labelled_true() {
        assert_eq!(
            patch(true),
            json!({"metadata": {"labels": {"jobrelay.dev/leader": "true"}}})
        );
    }

    #[test]
    fn a_failed_write_is_tried_again_and_a_written_one_is_not() {
        assert_eq!(next_try(false), Some(RETRY));
        assert_eq!(next_try(true), None);
    }

    #[test]
    fn a_follower_has_the_label_removed() {
        assert_eq!(
            patch(false),
            json!({"metadata": {"labels": {"jobrelay.dev/leader": null}}})
        );
    }
}
