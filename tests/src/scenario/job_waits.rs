//! A scenario's waits on its manager Jobs: for their outcomes, a condition,
//! the remote-cleanup finalizer let go, the Job gone, an Event.

use std::collections::BTreeMap;
use std::time::Duration;

use jobrelay_proto::wire::REMOTE_CLEANUP_FINALIZER;
use jobrelay_testbed::wait::{self, Seen, WAIT};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::Scenario;
use super::outcome::{explain, has_condition, outcome};

impl Scenario {
    /// Waits until every named manager Job shows its expected final
    /// condition (`Complete` or `Failed`).
    pub async fn wait_outcomes(
        &self,
        expected: &BTreeMap<String, &'static str>,
        timeout: Duration,
    ) {
        wait::until(
            format!("{} manager Jobs to reach their outcome", expected.len()),
            timeout,
            || async {
                let list = match self.jobs.list(&ListParams::default()).await {
                    Ok(list) => list,
                    Err(e) => return Seen::Waiting(e.to_string()),
                };
                let seen: BTreeMap<String, &Job> =
                    list.items.iter().map(|j| (j.name_any(), j)).collect();
                let wrong: Vec<String> = expected
                    .iter()
                    .filter(|(name, want)| seen.get(*name).and_then(|j| outcome(j)) != Some(**want))
                    .map(|(name, want)| match seen.get(name) {
                        Some(job) => format!("{name}: want {want}, has {}", explain(job)),
                        None => format!("{name}: want {want}, the Job is gone"),
                    })
                    .collect();
                if wrong.is_empty() {
                    Seen::Ready(())
                } else {
                    Seen::Waiting(format!("{} not there: {}", wrong.len(), wrong.join("; ")))
                }
            },
        )
        .await
    }

    /// Waits until the manager Job has condition `type_` = True.
    pub async fn wait_condition(&self, name: &str, type_: &str) -> Job {
        wait::until(format!("manager Job {name} {type_}"), WAIT, || async {
            match self.jobs.get(name).await {
                Ok(job) if has_condition(&job, type_) => Seen::Ready(job),
                Ok(job) => Seen::Waiting(format!("status {:?}", job.status)),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        })
        .await
    }

    /// Waits until the manager Job no longer holds the remote-cleanup finalizer
    /// (or is gone altogether).
    pub async fn wait_released(&self, name: &str) {
        wait::until(
            format!("manager Job {name} released by jobrelay"),
            WAIT,
            || async {
                match self.jobs.get_opt(name).await {
                    Ok(Some(job))
                        if job
                            .finalizers()
                            .iter()
                            .any(|f| f == REMOTE_CLEANUP_FINALIZER) =>
                    {
                        Seen::Waiting(format!("finalizers {:?}", job.finalizers()))
                    }
                    Ok(_) => Seen::Ready(()),
                    Err(e) => Seen::Waiting(e.to_string()),
                }
            },
        )
        .await
    }

    pub async fn wait_gone(&self, name: &str) {
        wait::until(format!("manager Job {name} gone"), WAIT, || async {
            match self.jobs.get_opt(name).await {
                Ok(None) => Seen::Ready(()),
                Ok(Some(job)) => Seen::Waiting(format!("finalizers {:?}", job.finalizers())),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        })
        .await
    }

    /// How many manager Jobs of the scenario are Complete now (none when
    /// they cannot be listed).
    pub async fn complete(&self) -> usize {
        let jobs = self
            .jobs
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        jobs.iter().filter(|j| has_condition(j, "Complete")).count()
    }

    /// The Events on the manager Job `name`: reason and note of each.
    pub async fn events(&self, name: &str) -> Vec<(String, String)> {
        self.events_on(name)
            .await
            .into_iter()
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    }

    /// The Events on the manager Job `name`, whole.
    pub async fn events_on(&self, name: &str) -> Vec<Event> {
        let events: Api<Event> = Api::namespaced(self.jobs.clone().into_client(), &self.ns);
        let list = events
            .list(&ListParams::default())
            .await
            .expect("list Events");
        list.items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .collect()
    }

    pub async fn wait_event(&self, name: &str, reason: &str) -> String {
        wait::until(format!("Event {reason} on Job {name}"), WAIT, || async {
            let events = self.events(name).await;
            match events.iter().find(|(r, _)| r == reason) {
                Some((_, note)) => Seen::Ready(note.clone()),
                None => Seen::Waiting(format!("events {events:?}")),
            }
        })
        .await
    }
}

/// Waits until a dry-run create of `job()` in `jobs` comes back with
/// jobrelay's `spec.managedBy`: the admission webhook is called, trusted and
/// knows the Job's queue. A dry run passes the webhooks as a create does
/// and leaves nothing behind.
pub async fn wait_given_managed_by(jobs: &Api<Job>, job: impl Fn() -> Job, timeout: Duration) {
    let dry_run = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait::until(
        "the webhook to give a queued Job jobrelay's managedBy",
        timeout,
        || async {
            match jobs.create(&dry_run, &job()).await {
                Ok(created) => match created.spec.and_then(|spec| spec.managed_by) {
                    Some(manager) if manager == jobrelay_proto::wire::MANAGED_BY => Seen::Ready(()),
                    other => Seen::Waiting(format!("managedBy {other:?}")),
                },
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;
}
