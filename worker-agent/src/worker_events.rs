//! Warning Events on the worker about a mirror or its Pods — the
//! scheduler's `FailedScheduling`, the kubelet's `FailedMount` and
//! `BackOff`, the worker's Job controller's `FailedCreate` (a quota, an
//! admission policy) — told to the manager, which shows them on the
//! manager Job with the worker named: its user has no credentials here.
//!
//! One watch of Warning Events (field selector `type=Warning`) within the
//! namespace policy. An Event is told only when it is about an object of
//! this origin the agent caches — a mirror Job or JobSet or one of their
//! Pods, matched by namespace, name and UID — and then once per reason and
//! kind of object per mirror in [`TOLD_FOR`], at most [`PER_MIRROR`]
//! reasons in that time: a Pod restarting all day tells its `BackOff` once
//! a quarter of an hour, and a mirror of a thousand Pods no more than one.
//! A Job controller's warning that the mirror ended (`BackoffLimitExceeded`,
//! …) is not told: the end is the mirror's status, which the manager shows.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::v1::{AgentMessage, WorkerEvent, WorkerEvents, agent_message::Kind};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::mpsc;

use crate::report::cut_short;
use crate::watched::origin_uid;

/// How long a reason told about a mirror is not told again.
pub const TOLD_FOR: Duration = Duration::from_secs(15 * 60);
/// Reasons told about one mirror in [`TOLD_FOR`] at most.
pub const PER_MIRROR: usize = 8;
/// Bytes of an Event's message told at most.
pub const MESSAGE_BYTES: usize = 512;
/// Events waiting to be told at most (a session away for a while): past
/// it, new ones are dropped.
pub const QUEUED: usize = 256;
/// The field selector of the Events watched.
pub const WARNINGS: &str = "type=Warning";

/// The warnings a Job controller gives as a Job ends (JobSet's alike): the
/// end is the mirror's status, copied onto the manager Job with its own
/// warning, so they are not told again.
const THE_END: [&str; 5] = [
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "PodFailurePolicy",
    "MaxFailedIndexesExceeded",
    "FailedIndexes",
];

/// Whether `event` is told at all: not a warning that says a mirror ended.
pub fn worth_telling(event: &CoreEvent) -> bool {
    let about_a_pod = event.involved_object.kind.as_deref() == Some("Pod");
    let reason = event.reason.as_deref().unwrap_or_default();
    about_a_pod || !THE_END.contains(&reason)
}

/// The objects of this origin the agent caches, to tell whose an Event is.
#[derive(Clone)]
pub struct Owners {
    pub pods: Store<Pod>,
    pub jobs: Store<Job>,
    pub jobsets: Option<Store<JobSet>>,
}

impl Owners {
    /// The origin UID of the object `event` is about, if it is one of this
    /// origin's the agent caches, the same object (UID) as the Event's.
    pub fn origin_of(&self, event: &CoreEvent) -> Option<String> {
        let about = &event.involved_object;
        let (name, namespace) = (about.name.as_deref()?, about.namespace.as_deref()?);
        let uid = about.uid.as_deref()?;
        let same = |meta: &kube::api::ObjectMeta| {
            (meta.uid.as_deref() == Some(uid))
                .then(|| origin_uid(meta))
                .flatten()
        };
        match about.kind.as_deref()? {
            "Pod" => same(
                self.pods
                    .get(&ObjectRef::new(name).within(namespace))?
                    .meta(),
            ),
            "Job" => same(
                self.jobs
                    .get(&ObjectRef::new(name).within(namespace))?
                    .meta(),
            ),
            "JobSet" => {
                let jobsets = self.jobsets.as_ref()?;
                same(jobsets.get(&ObjectRef::new(name).within(namespace))?.meta())
            }
            _ => None,
        }
    }
}

/// What is told of `event`: the object, the reason, who reported it and
/// its message, cut to [`MESSAGE_BYTES`].
pub fn told(event: &CoreEvent) -> WorkerEvent {
    let about = &event.involved_object;
    let object = format!(
        "{} {}",
        about.kind.as_deref().unwrap_or_default(),
        about.name.as_deref().unwrap_or_default()
    );
    let source = event
        .reporting_component
        .clone()
        .filter(|c| !c.is_empty())
        .or_else(|| event.source.as_ref().and_then(|s| s.component.clone()))
        .unwrap_or_default();
    WorkerEvent {
        object,
        reason: event.reason.clone().unwrap_or_default(),
        message: cut_short(
            event.message.as_deref().unwrap_or_default().trim(),
            MESSAGE_BYTES,
        ),
        source,
    }
}

/// Which reasons were told about each mirror lately.
#[derive(Debug, Default)]
pub struct Told {
    mirrors: HashMap<String, Vec<(String, Instant)>>,
    /// Mirrors remembered after the last sweep of what ran out; the next
    /// comes when they have doubled, so sweeping costs a constant per Event.
    swept_at_size: usize,
}

impl Told {
    /// Whether `event` about the mirror `uid` is told at `now`: not when
    /// its reason about its kind of object was told within [`TOLD_FOR`],
    /// nor when [`PER_MIRROR`] others were. Remembers what it lets through.
    pub fn first(&mut self, uid: &str, event: &WorkerEvent, now: Instant) -> bool {
        let kind = event.object.split(' ').next().unwrap_or_default();
        let key = format!("{kind} {}", event.reason);
        let fresh = |at: &Instant| now.saturating_duration_since(*at) < TOLD_FOR;
        // What ran out is forgotten, with the mirrors left with nothing.
        if self.mirrors.len() >= 2 * self.swept_at_size.max(64) {
            self.mirrors.retain(|_, told| {
                told.retain(|(_, at)| fresh(at));
                !told.is_empty()
            });
            self.swept_at_size = self.mirrors.len();
        }
        let told = self.mirrors.entry(uid.to_string()).or_default();
        told.retain(|(_, at)| fresh(at));
        if told.len() >= PER_MIRROR || told.iter().any(|(k, _)| *k == key) {
            return false;
        }
        told.push((key, now));
        true
    }
}

/// The message that tells the manager `event` about the mirror `uid`.
pub fn message(uid: String, event: WorkerEvent) -> AgentMessage {
    AgentMessage {
        kind: Some(Kind::WorkerEvents(WorkerEvents {
            origin_uid: uid,
            events: vec![event],
        })),
    }
}

/// Tells the manager, through `out`, the Warning Events `events` (a watch)
/// shows about this origin's objects, as [`Told`] lets them through; ends
/// with the watch. Only Events seen as they come are told: a (re)list's
/// are old news. An Event that finds `out` full (no session for a while)
/// is dropped.
pub async fn run(
    events: impl futures::Stream<Item = Result<watcher::Event<CoreEvent>, watcher::Error>>,
    owners: Owners,
    out: mpsc::Sender<AgentMessage>,
) {
    let mut told = Told::default();
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(watcher::Event::Apply(event)) => event,
            Ok(_) => continue,
            Err(error) => {
                tracing::warn!(%error, "watch of the worker's Warning Events failed; retrying");
                continue;
            }
        };
        let Some(uid) = owners.origin_of(&event).filter(|_| worth_telling(&event)) else {
            continue;
        };
        let about = self::told(&event);
        if told.first(&uid, &about, Instant::now()) {
            let _ = out.try_send(message(uid, about));
        }
    }
}

#[cfg(test)]
#[path = "worker_events_tests.rs"]
mod tests;
