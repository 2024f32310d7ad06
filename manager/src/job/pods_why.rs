//! What a Job's user is told of why Pods of its mirror wait or failed on
//! its worker, where they look without worker credentials: the
//! `jobrelay.dev/pods` annotation (for `kubectl get -o custom-columns`),
//! rewritten when what the agent reports changes and removed once no Pod
//! waits or failed for a reason; and a warning Event (`PodsWaiting`,
//! `PodsFailed`) the first time each reason is seen, in a series of its own
//! per reason (`kubectl describe job`). Pure; the status copy carries it
//! out. Beside them, the worker's own Warning Events about the mirror and
//! its Pods, which the agent passes on, as `WorkerWarning`s.
//!
//! The annotation is also what remembers which reasons were shown, so a
//! manager that restarts (or another replica) tells nothing twice.

use jobrelay_proto::v1::WorkerEvent;

use crate::mirror::{PodWhy, PodsSeen};
use crate::reason::Reason;

/// A warning Event to publish on the Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodsEvent {
    pub reason: Reason,
    /// What tells its series from another reason's.
    pub topic: String,
    pub note: String,
}

/// What the Job shows next of its mirror's Pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shown {
    /// The annotation's new value (`Some(None)`: removed); `None` when it
    /// stays as it is.
    pub annotation: Option<Option<String>>,
    pub events: Vec<PodsEvent>,
}

/// What follows the agent's latest word on the Pods of the mirror on
/// `cluster` (`None`: it says nothing of them), given the annotation the
/// Job shows (`shown`). Once the mirror `ended` (succeeded or failed) the
/// annotation still follows, but no warning is told: the Job's own end is
/// (`RemoteFinished`, with its Pods' reasons — [`reasons`]).
pub fn shown(cluster: &str, pods: Option<&PodsSeen>, shown: Option<&str>, ended: bool) -> Shown {
    let Some(pods) = pods else {
        return Shown::default();
    };
    let text = annotation(cluster, pods);
    if text.as_deref() == shown {
        return Shown::default();
    }
    let events = pods
        .reasons
        .iter()
        .filter(|_| !ended)
        .filter(|why| !shown.is_some_and(|shown| shown.contains(&headline(why))))
        .map(|why| PodsEvent {
            reason: match why.failed {
                true => Reason::PodsFailed,
                false => Reason::PodsWaiting,
            },
            topic: headline(why),
            note: format!("on cluster {cluster}, {}", line(why),),
        })
        .collect();
    Shown {
        annotation: Some(text),
        events,
    }
}

/// A Warning Event on the worker about the mirror or one of its Pods, as
/// the Job shows it: a `WorkerWarning` naming the cluster, the object, the
/// reason and who reported it, in a series per reason and kind of object.
pub fn worker_warning(cluster: &str, event: &WorkerEvent) -> PodsEvent {
    let kind = event.object.split(' ').next().unwrap_or_default();
    let by = match event.source.is_empty() {
        true => String::new(),
        false => format!(" ({})", event.source),
    };
    let said = match event.message.is_empty() {
        true => String::new(),
        false => format!(": {}", event.message),
    };
    PodsEvent {
        reason: Reason::WorkerWarning,
        topic: format!("{kind} {}", event.reason),
        note: format!(
            "on cluster {cluster}, {}: {}{by}{said}",
            event.object, event.reason
        ),
    }
}

/// Each reason of `pods` in words, `; `-separated; `None` when no Pod waits
/// or failed for a reason.
pub fn reasons(pods: &PodsSeen) -> Option<String> {
    if pods.reasons.is_empty() {
        return None;
    }
    Some(pods.reasons.iter().map(line).collect::<Vec<_>>().join("; "))
}

/// The annotation for `pods` on `cluster`: where, the Pods by phase, then
/// each reason; `None` when no Pod waits or failed for a reason.
pub fn annotation(cluster: &str, pods: &PodsSeen) -> Option<String> {
    let reasons = reasons(pods)?;
    let phases = [
        (pods.pending, "Pending"),
        (pods.running, "Running"),
        (pods.succeeded, "Succeeded"),
        (pods.failed, "Failed"),
    ]
    .into_iter()
    .filter(|(count, _)| *count > 0)
    .map(|(count, phase)| format!("{count} {phase}"))
    .collect::<Vec<_>>()
    .join(", ");
    Some(format!("cluster {cluster} ({phases}): {reasons}"))
}

/// One reason in words: how many Pods, what they do, and its message.
fn line(why: &PodWhy) -> String {
    let pods = match why.pods {
        1 => "1 Pod".to_string(),
        n => format!("{n} Pods"),
    };
    match why.message.is_empty() {
        true => format!("{pods} {}", headline(why)),
        false => format!("{pods} {}: {}", headline(why), why.message),
    }
}

/// What a reason's Pods do, without how many or the message: the same for
/// as long as the reason holds.
fn headline(why: &PodWhy) -> String {
    let verb = match why.failed {
        true => "failed",
        false => "wait",
    };
    let mut about = Vec::new();
    if !why.container.is_empty() {
        about.push(format!("container {}", why.container));
    }
    if let Some(code) = why.exit_code {
        about.push(format!("exit code {code}"));
    }
    match about.is_empty() {
        true => format!("{verb} {}", why.reason),
        false => format!("{verb} {} ({})", why.reason, about.join(", ")),
    }
}

#[cfg(test)]
#[path = "pods_why_tests.rs"]
mod tests;
