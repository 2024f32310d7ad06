//! What a mirror's status says of its Pods: how many are in each phase, and
//! the few reasons most of them share for waiting or having failed — the
//! kubelet's (`ImagePullBackOff`, `CrashLoopBackOff`, `OOMKilled`, an exit
//! code), the scheduler's (`Unschedulable`) or the Pod's own (`Evicted`,
//! `DeadlineExceeded`). The manager shows them on the manager Job, where
//! its user, who has no credentials for the worker, looks.
//!
//! Read from the agent's one watch of this origin's Pods, which keeps of
//! each Pod only what is read here ([`keep_what_is_read`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use jobrelay_proto::v1::{PodReason, PodReasonKind, PodSummary};
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
    Pod, PodCondition, PodSpec, PodStatus,
};

use crate::report::cut_short;
use crate::unschedulable;

/// Reasons a summary carries at most.
pub const REASONS: usize = 3;
/// Bytes of a reason's message kept at most.
pub const MESSAGE_BYTES: usize = 256;

/// Waiting reasons every Pod passes through on its way to running: not a
/// reason to show.
const ON_THE_WAY: [&str; 2] = ["ContainerCreating", "PodInitializing"];

/// A summary as a status carries it, compared as the manager reads it: the
/// counts by phase are shown only beside a reason, so two summaries without
/// one are the same — Pods starting, running and succeeding send no status
/// the Job's own would not.
#[derive(Debug, Clone)]
pub struct Said(pub PodSummary);

impl PartialEq for Said {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0 || (self.0.reasons.is_empty() && other.0.reasons.is_empty())
    }
}

/// One Pod's reason, before Pods sharing it are counted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Why {
    kind: i32,
    reason: String,
    container: String,
    exit_code: Option<i32>,
}

/// The summary of `pods` (one mirror's, by name in any order): counts by
/// phase and at most [`REASONS`] reasons, most Pods first, each with the
/// message of the first Pod by name that has it. Pods being deleted are
/// not counted: they are on their way out, whatever they say.
pub fn summary(pods: &[Arc<Pod>]) -> PodSummary {
    let mut sorted: Vec<&Pod> = pods
        .iter()
        .map(Arc::as_ref)
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    sorted.sort_unstable_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut summary = PodSummary::default();
    let mut reasons: BTreeMap<Why, (u32, String)> = BTreeMap::new();
    for pod in sorted {
        let status = pod.status.as_ref();
        match status.and_then(|s| s.phase.as_deref()) {
            Some("Running") => summary.running += 1,
            Some("Succeeded") => summary.succeeded += 1,
            Some("Failed") => summary.failed += 1,
            _ => summary.pending += 1,
        }
        if let Some((why, message)) = why(pod) {
            reasons.entry(why).or_insert((0, message)).0 += 1;
        }
    }
    let mut reasons: Vec<(Why, (u32, String))> = reasons.into_iter().collect();
    // Most Pods first; among equals, the order of the keys.
    reasons.sort_by(|(_, (a, _)), (_, (b, _))| b.cmp(a));
    summary.reasons = reasons
        .into_iter()
        .take(REASONS)
        .map(|(why, (pods, message))| PodReason {
            kind: why.kind,
            reason: why.reason,
            message: cut_short(&message, MESSAGE_BYTES),
            container: why.container,
            exit_code: why.exit_code,
            pods,
        })
        .collect();
    summary
}

/// Why `pod` waits or failed, with its message; `None` for a Pod on its
/// way to running, running, or done.
fn why(pod: &Pod) -> Option<(Why, String)> {
    let status = pod.status.as_ref()?;
    let waiting = PodReasonKind::Waiting as i32;
    let failed = PodReasonKind::Failed as i32;
    if status.phase.as_deref() == Some("Failed") {
        if let Some(reason) = status.reason.clone().filter(|r| !r.is_empty()) {
            let why = Why {
                kind: failed,
                reason,
                container: String::new(),
                exit_code: None,
            };
            return Some((why, status.message.clone().unwrap_or_default()));
        }
        let ended = containers(status).find_map(|c| {
            let ended = c.state.as_ref()?.terminated.as_ref()?;
            (ended.exit_code != 0).then_some((c, ended))
        });
        let (container, ended) = ended?;
        return Some(ended_with(failed, &container.name, ended, None));
    }
    if status.phase.as_deref() == Some("Pending")
        && let Some((_, message)) = unschedulable::waiting(pod)
    {
        let why = Why {
            kind: waiting,
            reason: "Unschedulable".into(),
            container: String::new(),
            exit_code: None,
        };
        return Some((why, message.to_string()));
    }
    if status.phase.as_deref() == Some("Succeeded") {
        return None;
    }
    containers(status).find_map(|c| {
        let ContainerStateWaiting { reason, message } = c.state.as_ref()?.waiting.as_ref()?;
        let reason = reason.as_deref().filter(|r| !ON_THE_WAY.contains(r))?;
        let message = message.clone().unwrap_or_default();
        let last = c.last_state.as_ref().and_then(|s| s.terminated.as_ref());
        Some(match last {
            // A container restarting: how it last ended says why.
            Some(ended) => {
                let (mut why, ended) = ended_with(waiting, &c.name, ended, Some(&message));
                why.reason = reason.to_string();
                (why, ended)
            }
            None => (
                Why {
                    kind: waiting,
                    reason: reason.to_string(),
                    container: c.name.clone(),
                    exit_code: None,
                },
                message,
            ),
        })
    })
}

/// A container's end as a reason: its own (`OOMKilled`, `Error`) and exit
/// code, the message its end left, after `before` if given.
fn ended_with(
    kind: i32,
    container: &str,
    ended: &ContainerStateTerminated,
    before: Option<&str>,
) -> (Why, String) {
    let reason = ended.reason.clone().unwrap_or_else(|| "Error".into());
    let said = ended.message.as_deref().unwrap_or("").trim();
    let last = format!("it last ended {reason} with exit code {}", ended.exit_code);
    let message = match before {
        Some(before) if !before.is_empty() => format!("{before}; {last}"),
        Some(_) => last,
        None => said.to_string(),
    };
    let why = Why {
        kind,
        reason,
        container: container.to_string(),
        exit_code: Some(ended.exit_code),
    };
    (why, message)
}

/// The Pod's containers' statuses, its init containers' first: one that
/// has not finished holds the others back.
fn containers(status: &PodStatus) -> impl Iterator<Item = &ContainerStatus> {
    let init = status.init_container_statuses.iter().flatten();
    init.chain(status.container_statuses.iter().flatten())
}

/// Keeps of a Pod what the agent reads: its metadata (no field ownership),
/// the node it is bound to, the names of its containers and init
/// containers (which the logs choose from), its phase, reason and message,
/// its PodScheduled condition, and of each container's status its name,
/// state and last termination (no image, no IDs). For
/// `WatchStreamExt::modify` before the reflector.
pub fn keep_what_is_read(pod: &mut Pod) {
    jobrelay_process::cache::trim(pod);
    let names = |containers: Option<Vec<Container>>| {
        containers.map(|all| all.into_iter().map(named).collect())
    };
    pod.spec = pod.spec.take().map(|spec| PodSpec {
        node_name: spec.node_name,
        containers: spec.containers.into_iter().map(named).collect(),
        init_containers: names(spec.init_containers),
        ..PodSpec::default()
    });
    let Some(status) = pod.status.take() else {
        return;
    };
    let scheduled: Vec<PodCondition> = status
        .conditions
        .into_iter()
        .flatten()
        .filter(|c| c.type_ == unschedulable::POD_SCHEDULED)
        .map(|c| PodCondition {
            last_probe_time: None,
            observed_generation: None,
            ..c
        })
        .collect();
    let kept = |statuses: Option<Vec<ContainerStatus>>| {
        statuses.map(|all| all.into_iter().map(container_kept).collect())
    };
    pod.status = Some(PodStatus {
        phase: status.phase,
        reason: status.reason,
        message: status.message,
        conditions: (!scheduled.is_empty()).then_some(scheduled),
        init_container_statuses: kept(status.init_container_statuses),
        container_statuses: kept(status.container_statuses),
        ..PodStatus::default()
    });
}

/// What is read of a container: its name.
fn named(container: Container) -> Container {
    Container {
        name: container.name,
        ..Container::default()
    }
}

/// What is read of a container's status.
fn container_kept(status: ContainerStatus) -> ContainerStatus {
    let state = |state: Option<ContainerState>| {
        state.map(|s| ContainerState {
            running: None,
            waiting: s.waiting,
            terminated: s.terminated.map(|t| ContainerStateTerminated {
                container_id: None,
                signal: None,
                started_at: None,
                finished_at: None,
                ..t
            }),
        })
    };
    ContainerStatus {
        name: status.name,
        state: state(status.state),
        last_state: state(status.last_state),
        ..ContainerStatus::default()
    }
}

#[cfg(test)]
#[path = "pod_summary_tests.rs"]
mod tests;
