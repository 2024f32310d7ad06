//! Applying mirrors: create (or update to a newer revision) the Job the
//! manager sent, never touching a same-named Job that is not this origin's.
//! A refusal that can clear by itself (`RejectReason::is_permanent` says
//! which) is retried with capped exponential backoff and jitter, and the
//! manager is told whenever its reason changes; a permanent one is reported
//! once.

use std::sync::Arc;
use std::time::Instant;

use backon::{BackoffBuilder, ExponentialBackoff};
use jobrelay_proto::v1::{
    AgentMessage, ApplyMirror, ApplyRejected, RejectReason, agent_message::Kind,
};
use jobrelay_proto::wire::{ORIGIN_LABEL, ORIGIN_UID_LABEL, QUEUE_NAME_LABEL, REVISION_ANNOTATION};
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tracing::{debug, info, warn};

use super::{FIELD_MANAGER, Mirrors, agent_message};
use crate::report::{ApplyFailure, apply_failure, revision_of};

/// An apply not yet taken by the worker.
pub(super) struct Pending {
    pub apply: ApplyMirror,
    /// Not before then; `None`: at the next pass.
    not_before: Option<Instant>,
    /// Set once the worker refused it for a reason that can clear.
    retry: Option<Retry>,
}

struct Retry {
    delays: ExponentialBackoff,
    /// The reason last reported to the manager.
    reason: RejectReason,
}

/// An apply the API server answered: what was sent, and what came of it.
pub struct Applied {
    apply: ApplyMirror,
    result: Result<(), ApplyFailure>,
}

/// What an answered apply does to the mirror's waiting apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
    /// It is done with: taken, or refused for good.
    Done,
    /// It stays, to be sent at the next pass.
    Again,
    /// It stays, to be sent once the backoff ran out.
    Backoff,
    /// A newer revision arrived while it was out (or the mirror is being
    /// deleted): the answer is for nothing that still waits.
    Stale,
}

/// Decides what an answer to the apply of `applied` (a revision) does, given
/// the revision now waiting for that mirror, if any.
fn settle(waiting: Option<u64>, applied: u64, result: &Result<(), ApplyFailure>) -> Settle {
    if waiting != Some(applied) {
        return Settle::Stale;
    }
    match result {
        Ok(()) => Settle::Done,
        Err(ApplyFailure::Wait(_)) => Settle::Again,
        Err(ApplyFailure::Refused(reason, _)) if reason.is_permanent() => Settle::Done,
        Err(ApplyFailure::Refused(..)) => Settle::Backoff,
    }
}

impl Mirrors {
    /// Takes the manager's applies (each replaces a waiting one of its
    /// mirror, backoff included) and sends every one that is due.
    pub fn apply_all(&mut self, applies: Vec<ApplyMirror>) {
        for apply in applies {
            let uid = apply.origin_uid.clone();
            if let Some(desired) = &mut self.desired {
                desired.insert(uid.clone());
            }
            let pending = Pending {
                apply,
                not_before: None,
                retry: None,
            };
            self.pending.insert(uid, pending);
        }
        self.apply_due();
    }

    /// Sends every waiting apply that is due, whose previous mirror is gone
    /// and that is not out already; each runs on its own, up to
    /// [`super::REQUEST_CONCURRENCY`] at once, and its answer comes back
    /// through [`Mirrors::applied`]. The agent's passes go on meanwhile, so
    /// a mirror that finished is reported while a burst of others is applied.
    pub(super) fn apply_due(&mut self) {
        let now = Instant::now();
        let due: Vec<ApplyMirror> = self
            .pending
            .iter()
            .filter(|(uid, p)| {
                !self.deleting.contains_key(*uid)
                    && !self.in_flight.contains(*uid)
                    && p.not_before.is_none_or(|at| at <= now)
            })
            .map(|(_, p)| p.apply.clone())
            .collect();
        for apply in due {
            self.in_flight.insert(apply.origin_uid.clone());
            let (client, origin) = (self.client.clone(), self.origin.clone());
            let (slots, answers) = (Arc::clone(&self.apply_slots), self.answers.clone());
            tokio::spawn(async move {
                // `self.apply_slots` is never closed.
                let _slot = slots.acquire().await;
                let result = try_apply(&client, &origin, &apply).await;
                let _ = answers.send(Applied { apply, result });
            });
        }
    }

    /// The next answer to an apply sent by [`Mirrors::apply_due`].
    pub async fn applied(&mut self) -> Applied {
        match self.answered.recv().await {
            Some(applied) => applied,
            // `self.answers` keeps the channel open.
            None => futures::future::pending().await,
        }
    }

    /// Records what came of an apply; tells the manager of a refusal.
    pub fn take_answer(&mut self, Applied { apply, result }: Applied, out: &mut Vec<AgentMessage>) {
        let uid = apply.origin_uid.clone();
        self.in_flight.remove(&uid);
        if self.deleting.contains_key(&uid) {
            // Its deletion waited for this answer.
            self.due.insert(uid.clone());
        }
        let waiting = self.pending.get(&uid).map(|p| p.apply.revision);
        match settle(waiting, apply.revision, &result) {
            Settle::Stale => {
                debug!(%uid, revision = apply.revision, "apply answered after a newer one arrived");
                // The newer one waited for this answer.
                self.apply_due();
            }
            Settle::Done => {
                self.pending.remove(&uid);
                if let Err(ApplyFailure::Refused(reason, message)) = result {
                    warn!(%uid, reason = reason.as_str_name(), %message, "apply refused for good");
                    out.push(refusal(&apply, reason, message, None));
                }
            }
            Settle::Again => debug!(%uid, ?result, "apply waits"),
            Settle::Backoff => {
                let (Some(pending), Err(ApplyFailure::Refused(reason, message))) =
                    (self.pending.get_mut(&uid), result)
                else {
                    return;
                };
                let builder = self.apply_retry;
                let retry = pending.retry.get_or_insert_with(|| Retry {
                    delays: builder.build(),
                    reason: RejectReason::Unspecified,
                });
                let delay = retry.delays.next().unwrap_or(self.apply_retry_max);
                pending.not_before = Some(Instant::now() + delay);
                if retry.reason == reason {
                    debug!(%uid, reason = reason.as_str_name(), %message, retry_in = ?delay, "apply refused again");
                    return;
                }
                retry.reason = reason;
                warn!(%uid, reason = reason.as_str_name(), %message, retry_in = ?delay, "apply refused; retrying with backoff");
                out.push(refusal(&apply, reason, message, Some(delay)));
            }
        }
    }
}

/// Creates the mirror `apply` carries, or updates this origin's one to its
/// revision.
async fn try_apply(
    client: &kube::Client,
    origin: &str,
    apply: &ApplyMirror,
) -> Result<(), ApplyFailure> {
    let rejected = |reason, message: String| Err(ApplyFailure::Refused(reason, message));
    let mut job: Job = match serde_json::from_slice(&apply.job) {
        Ok(job) => job,
        Err(e) => return rejected(RejectReason::Invalid, format!("unreadable Job: {e}")),
    };
    let labels = job.metadata.labels.clone().unwrap_or_default();
    if labels.get(ORIGIN_LABEL).map(String::as_str) != Some(origin)
        || labels.get(ORIGIN_UID_LABEL) != Some(&apply.origin_uid)
    {
        return rejected(
            RejectReason::Invalid,
            format!(
                "the Job does not carry {ORIGIN_LABEL}={} and {ORIGIN_UID_LABEL}={}",
                origin, apply.origin_uid
            ),
        );
    }
    let (Some(namespace), name) = (job.namespace(), job.name_any()) else {
        return rejected(RejectReason::Invalid, "the Job has no namespace".into());
    };
    let api: Api<Job> = Api::namespaced(client.clone(), &namespace);
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
                return Err(ApplyFailure::Wait(
                    "the existing Job vanished; trying again".into(),
                ));
            }
            Err(e) => return Err(apply_failure(&e)),
        },
        Err(e) => return Err(apply_failure(&e)),
    };
    let existing_labels = existing.metadata.labels.clone().unwrap_or_default();
    if existing_labels.get(ORIGIN_LABEL).map(String::as_str) != Some(origin) {
        return rejected(
            RejectReason::Conflict,
            format!(
                "Job {namespace}/{name} already exists on this cluster and was not created by jobrelay for origin {} (no matching {ORIGIN_LABEL} label); it is left untouched",
                origin
            ),
        );
    }
    if existing_labels.get(ORIGIN_UID_LABEL) != Some(&apply.origin_uid)
        || existing.metadata.deletion_timestamp.is_some()
    {
        return Err(ApplyFailure::Wait(format!(
            "an older mirror of {namespace}/{name} is still being deleted"
        )));
    }
    if revision_of(&existing) >= apply.revision {
        return Ok(());
    }
    if finished(&existing) {
        // Its spec is left as it ran: the worker's Job controller no
        // longer acts on it, and a finished Job refuses what a suspension
        // writes (its start time). The revision is recorded, so the
        // manager knows the worker holds it, and the outcome stands.
        let annotations = serde_json::json!({
            "metadata": {"annotations": {REVISION_ANNOTATION: apply.revision.to_string()}}
        });
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&annotations))
            .await
            .map_err(|e| apply_failure(&e))?;
        info!(uid = %apply.origin_uid, %namespace, %name, revision = apply.revision, "mirror already finished; revision recorded, its spec left as it ran");
        return Ok(());
    }
    let queued_here = keep_what_the_workers_kueue_owns(&mut job, &existing);
    let steps = if queued_here {
        Vec::new()
    } else {
        before_update(&existing, &job)
    };
    for step in steps {
        let (patch, status) = match step {
            Prepare::Suspend => (serde_json::json!({"spec": {"suspend": true}}), false),
            Prepare::ClearStartTime => (serde_json::json!({"status": {"startTime": null}}), true),
        };
        let params = PatchParams::default();
        let patched = match status {
            false => api.patch(&name, &params, &Patch::Merge(&patch)).await,
            true => {
                api.patch_status(&name, &params, &Patch::Merge(&patch))
                    .await
            }
        };
        patched.map_err(|e| apply_failure(&e))?;
        debug!(uid = %apply.origin_uid, %namespace, %name, ?step, "mirror prepared for a suspended revision");
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(&job))
        .await
        .map_err(|e| apply_failure(&e))?;
    info!(uid = %apply.origin_uid, %namespace, %name, revision = apply.revision, "mirror updated");
    Ok(())
}

/// A write that must come before a new revision is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prepare {
    /// Suspend the mirror first.
    Suspend,
    /// Clear `status.startTime`, which Kubernetes' Job controller keeps on a
    /// suspended Job: only a suspended Job without one may have its pod
    /// template's scheduling (node selector, tolerations, labels) changed —
    /// as Kueue does when it evicts and later admits a Job elsewhere.
    ClearStartTime,
}

/// Whether the mirror finished (`Complete` or `Failed`): nothing applied
/// later changes how it ran. A mirror only on the way to one
/// (`SuccessCriteriaMet`, `FailureTarget`) is not: one whose Pod succeeded
/// as it was suspended (its start time cleared) can complete only once a
/// resume gives it a start time again.
fn finished(existing: &Job) -> bool {
    existing
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.status == "True" && matches!(c.type_.as_str(), "Complete" | "Failed"))
}

/// What to write before applying `desired` over `existing`: a mirror being
/// suspended is suspended, then has its start time cleared, so this and any
/// later revision may change its pod template.
fn before_update(existing: &Job, desired: &Job) -> Vec<Prepare> {
    let suspended = |job: &Job| job.spec.as_ref().and_then(|s| s.suspend) == Some(true);
    let started = existing
        .status
        .as_ref()
        .is_some_and(|s| s.start_time.is_some());
    if !suspended(desired) || !started {
        return Vec::new();
    }
    if suspended(existing) {
        vec![Prepare::ClearStartTime]
    } else {
        vec![Prepare::Suspend, Prepare::ClearStartTime]
    }
}

/// A mirror queued in this cluster's own Kueue (it carries a queue name) has
/// its `suspend`, pod template and queue name owned by that Kueue once
/// created: a later revision keeps what the cluster shows for them, so it
/// neither fights Kueue's admission nor touches a started Job's template.
/// True when the mirror is such a one.
fn keep_what_the_workers_kueue_owns(desired: &mut Job, existing: &Job) -> bool {
    let queue = |job: &Job| {
        job.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(QUEUE_NAME_LABEL))
            .cloned()
    };
    if queue(desired).is_none() {
        return false;
    }
    if let Some(existing_queue) = queue(existing) {
        desired
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(QUEUE_NAME_LABEL.into(), existing_queue);
    }
    if let (Some(desired), Some(existing)) = (desired.spec.as_mut(), existing.spec.as_ref()) {
        desired.suspend = existing.suspend;
        desired.template = existing.template.clone();
    }
    true
}

fn refusal(
    apply: &ApplyMirror,
    reason: RejectReason,
    message: String,
    retry_in: Option<std::time::Duration>,
) -> AgentMessage {
    agent_message(Kind::ApplyRejected(ApplyRejected {
        origin_uid: apply.origin_uid.clone(),
        revision: apply.revision,
        reason: reason as i32,
        message,
        retry_in: retry_in.and_then(|d| prost_types::Duration::try_from(d).ok()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(suspend: bool, started: bool) -> Job {
        let mut job: Job = serde_json::from_value(serde_json::json!({
            "spec": {"suspend": suspend, "template": {}},
        }))
        .unwrap();
        if started {
            job.status = Some(
                serde_json::from_value(serde_json::json!({"startTime": "2026-11-24T10:00:00Z"}))
                    .unwrap(),
            );
        }
        job
    }

    #[test]
    fn an_answered_apply_is_done_with_waits_or_backs_off_by_what_came_of_it() {
        let refused = |reason| Err(ApplyFailure::Refused(reason, "no".into()));
        assert_eq!(settle(Some(3), 3, &Ok(())), Settle::Done);
        assert_eq!(
            settle(Some(3), 3, &refused(RejectReason::Invalid)),
            Settle::Done,
            "refused for good: reported once, not sent again"
        );
        assert_eq!(
            settle(Some(3), 3, &refused(RejectReason::QuotaExceeded)),
            Settle::Backoff
        );
        assert_eq!(
            settle(Some(3), 3, &Err(ApplyFailure::Wait("older mirror".into()))),
            Settle::Again
        );
    }

    #[test]
    fn an_answer_for_a_revision_no_longer_waiting_changes_nothing() {
        let refused = Err(ApplyFailure::Refused(RejectReason::Invalid, "no".into()));
        for result in [Ok(()), refused] {
            assert_eq!(
                settle(Some(4), 3, &result),
                Settle::Stale,
                "revision 4 arrived while 3 was out: 4 is still sent"
            );
            assert_eq!(settle(None, 3, &result), Settle::Stale, "deleted while out");
        }
    }

    #[test]
    fn a_started_mirror_is_suspended_and_its_start_time_cleared_before_a_suspended_revision() {
        assert_eq!(
            before_update(&job(false, true), &job(true, false)),
            [Prepare::Suspend, Prepare::ClearStartTime]
        );
        assert_eq!(
            before_update(&job(true, true), &job(true, false)),
            [Prepare::ClearStartTime],
            "suspended by an earlier revision, start time still set"
        );
    }

    #[test]
    fn a_mirror_queued_in_the_workers_kueue_keeps_what_that_kueue_owns() {
        let labelled = |mut job: Job, queue: &str| {
            job.metadata.labels = Some([(QUEUE_NAME_LABEL.to_string(), queue.to_string())].into());
            job
        };
        let mut existing = labelled(job(false, true), "batch");
        existing.spec.as_mut().unwrap().template.spec = Some(
            serde_json::from_value(serde_json::json!({
                "containers": [], "nodeSelector": {"pool": "worker-flavor"},
            }))
            .unwrap(),
        );
        let mut desired = labelled(job(true, false), "batch-renamed");
        desired.spec.as_mut().unwrap().parallelism = Some(3);
        assert!(keep_what_the_workers_kueue_owns(&mut desired, &existing));
        let spec = desired.spec.as_ref().unwrap();
        assert_eq!(
            spec.suspend,
            Some(false),
            "admitted by the worker's Kueue: left so"
        );
        assert_eq!(spec.template, existing.spec.as_ref().unwrap().template);
        assert_eq!(spec.parallelism, Some(3), "the rest is applied");
        assert_eq!(desired.metadata.labels.unwrap()[QUEUE_NAME_LABEL], "batch");

        let mut unqueued = job(true, false);
        assert!(!keep_what_the_workers_kueue_owns(&mut unqueued, &existing));
        assert_eq!(unqueued.spec.unwrap().suspend, Some(true));
    }

    #[test]
    fn a_finished_mirror_is_left_as_it_ran_and_one_about_to_finish_is_not() {
        let with = |type_: &str, status: &str| {
            let mut job = job(false, true);
            job.status.as_mut().unwrap().conditions = Some(vec![
                serde_json::from_value(serde_json::json!({"type": type_, "status": status}))
                    .unwrap(),
            ]);
            job
        };
        for outcome in ["Complete", "Failed"] {
            assert!(finished(&with(outcome, "True")), "{outcome}");
        }
        for interim in ["SuccessCriteriaMet", "FailureTarget"] {
            assert!(!finished(&with(interim, "True")), "{interim}");
        }
        assert!(!finished(&with("Complete", "False")));
        assert!(!finished(&with("Suspended", "True")));
        assert!(!finished(&job(false, true)), "running");
    }

    #[test]
    fn nothing_comes_first_for_a_running_revision_or_a_mirror_that_never_started() {
        assert!(before_update(&job(false, true), &job(false, false)).is_empty());
        assert!(before_update(&job(true, false), &job(true, false)).is_empty());
        assert!(before_update(&job(true, false), &job(false, false)).is_empty());
    }
}
