//! Kubernetes Events on manager Jobs, one reason per step of a mirror's life.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::Semaphore;

/// The steps a user sees in `kubectl describe job`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    Dispatched,
    RemoteFinished,
    RemoteCleanupStarted,
    RemotePodsGone,
    /// The worker refused the Job for good; it fails.
    RemoteRejected,
    /// The worker refused the Job for a reason that can clear; its agent
    /// tries again.
    DispatchWaiting,
    /// The mirror was removed behind jobrelay's back.
    RemoteJobLost,
    ClusterLost,
    /// No registered cluster can take the Job as it is pinned.
    Unplaceable,
    /// A mirror queued in its worker's own Kueue was removed, Pods first
    /// (the manager's Kueue evicted the Job, or the worker's did not admit
    /// it in time); the Job is placed again when Kueue admits it.
    MirrorWithdrawn,
    /// A manager replica took the Lease (on the Lease).
    LeaderElection,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Dispatched => "Dispatched",
            Reason::RemoteFinished => "RemoteFinished",
            Reason::RemoteCleanupStarted => "RemoteCleanupStarted",
            Reason::RemotePodsGone => "RemotePodsGone",
            Reason::RemoteRejected => "RemoteRejected",
            Reason::DispatchWaiting => "DispatchWaiting",
            Reason::RemoteJobLost => "RemoteJobLost",
            Reason::ClusterLost => "ClusterLost",
            Reason::Unplaceable => "Unplaceable",
            Reason::MirrorWithdrawn => "MirrorWithdrawn",
            Reason::LeaderElection => "LeaderElection",
        }
    }

    fn event_type(self) -> &'static str {
        match self {
            Reason::RemoteRejected
            | Reason::DispatchWaiting
            | Reason::RemoteJobLost
            | Reason::ClusterLost
            | Reason::Unplaceable => "Warning",
            _ => "Normal",
        }
    }
}

/// Publishes Events (`events.k8s.io/v1`) as `jobrelay-manager`. The same
/// reason on the same Job within [`SERIES_WINDOW`] of the last one becomes a
/// series on the first Event (its count goes up), as Kubernetes' own event
/// recorders do. What is remembered for that is a few bytes per Event, and
/// forgetting what ran out is paid for in proportion to what is published —
/// a manager publishing for thousands of Jobs a minute keeps neither a copy
/// of every Event nor a scan of them per Event.
///
/// At most [`WRITERS`] Event writes are in flight: the manager's requests
/// share one flow of the API server's priority and fairness, and a burst of
/// Events must not queue ahead of the status and dispatch writes users wait
/// for. An Event waits for its turn instead.
#[derive(Clone)]
pub struct Events {
    client: kube::Client,
    instance: String,
    series: Arc<Mutex<Series>>,
    writers: Arc<Semaphore>,
}

/// Event writes in flight at most.
const WRITERS: usize = 4;

/// How long after an Event the same reason on the same Job adds to it.
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

const CONTROLLER: &str = "jobrelay-manager";

impl Events {
    pub fn new(client: kube::Client, instance: &str) -> Self {
        Events {
            client,
            instance: instance.into(),
            series: Arc::default(),
            writers: Arc::new(Semaphore::new(WRITERS)),
        }
    }

    /// Records `reason` on the Job, at once as far as the caller is
    /// concerned: the write waits for its turn in a task of its own. A
    /// failure to record is logged, never fatal.
    pub fn publish(&self, job: &ObjectReference, reason: Reason, note: String) {
        let now = Timestamp::now();
        let key = SeriesKey {
            regarding: job.uid.clone().unwrap_or_default(),
            name: job.name.clone().unwrap_or_default(),
            reason,
        };
        let write = self
            .series
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next(key, now);
        let namespace = job.namespace.clone().unwrap_or_else(|| "default".into());
        let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        let request = match write {
            Write::Create { name } => Request::Create(Box::new(K8sEvent {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(namespace),
                    ..Default::default()
                },
                action: Some(reason.as_str().into()),
                reason: Some(reason.as_str().into()),
                note: Some(note),
                event_time: Some(MicroTime(now)),
                regarding: Some(job.clone()),
                reporting_controller: Some(CONTROLLER.into()),
                reporting_instance: Some(self.instance.clone()),
                type_: Some(reason.event_type().into()),
                ..Default::default()
            })),
            Write::Count { name, count } => Request::Count(
                name,
                serde_json::json!({
                    "series": {"count": count, "lastObservedTime": MicroTime(now)},
                }),
            ),
        };
        let writers = Arc::clone(&self.writers);
        let job = job.name.clone();
        tokio::spawn(async move {
            let Ok(_turn) = writers.acquire().await else {
                return;
            };
            let written = match request {
                Request::Create(event) => events
                    .create(&PostParams::default(), &event)
                    .await
                    .map(drop),
                Request::Count(name, series) => events
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&series))
                    .await
                    .map(drop),
            };
            if let Err(error) = written {
                tracing::warn!(%error, reason = reason.as_str(), ?job, "could not record Event");
            }
        });
    }
}

/// The request an Event write sends.
enum Request {
    Create(Box<K8sEvent>),
    /// The Event's name, and the merge patch that counts one more.
    Count(String, serde_json::Value),
}

/// What makes two Events one series.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    regarding: String,
    name: String,
    reason: Reason,
}

/// The Events published lately, as much as a series needs of them.
#[derive(Debug, Default)]
struct Series {
    recent: HashMap<SeriesKey, Published>,
    /// Size of `recent` after the last sweep; the next one comes when it
    /// has doubled, so sweeping costs a constant per Event published.
    swept_at_size: usize,
}

#[derive(Debug, Clone, PartialEq)]
struct Published {
    name: String,
    count: i32,
    last: Timestamp,
}

/// The write an Event takes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Write {
    /// A new Event of this name.
    Create { name: String },
    /// One more of the series of Event `name`.
    Count { name: String, count: i32 },
}

impl Series {
    /// Decides the write for `key` published at `now`, and remembers it.
    fn next(&mut self, key: SeriesKey, now: Timestamp) -> Write {
        if self.recent.len() >= 2 * self.swept_at_size.max(64) {
            self.recent.retain(|_, p| within_window(p.last, now));
            self.swept_at_size = self.recent.len();
        }
        match self.recent.get_mut(&key) {
            Some(published) if within_window(published.last, now) => {
                published.count += 1;
                published.last = now;
                Write::Count {
                    name: published.name.clone(),
                    count: published.count,
                }
            }
            _ => {
                let name = format!("{}.{:x}", key.name, now.as_nanosecond());
                self.recent.insert(
                    key,
                    Published {
                        name: name.clone(),
                        count: 1,
                        last: now,
                    },
                );
                Write::Create { name }
            }
        }
    }
}

fn within_window(last: Timestamp, now: Timestamp) -> bool {
    now.duration_since(last)
        < SignedDuration::try_from(SERIES_WINDOW).unwrap_or(SignedDuration::MAX)
}

/// A reference to a manager Job from its key and UID.
pub fn job_reference(namespace: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        uid: Some(uid.into()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(job: &str, reason: Reason) -> SeriesKey {
        SeriesKey {
            regarding: format!("uid-{job}"),
            name: job.into(),
            reason,
        }
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    #[test]
    fn the_first_event_of_a_reason_on_a_job_is_created() {
        let mut series = Series::default();
        let Write::Create { name } = series.next(key("train", Reason::Dispatched), at(0)) else {
            panic!("created");
        };
        assert!(name.starts_with("train."), "{name}");
        let other = series.next(key("train", Reason::RemoteFinished), at(1));
        assert!(
            matches!(other, Write::Create { .. }),
            "another reason: {other:?}"
        );
        let elsewhere = series.next(key("eval", Reason::Dispatched), at(1));
        assert!(
            matches!(elsewhere, Write::Create { .. }),
            "another Job: {elsewhere:?}"
        );
    }

    #[test]
    fn the_same_reason_within_the_window_counts_on_the_first_event() {
        let mut series = Series::default();
        let Write::Create { name } = series.next(key("train", Reason::ClusterLost), at(0)) else {
            panic!("created");
        };
        assert_eq!(
            series.next(key("train", Reason::ClusterLost), at(60)),
            Write::Count {
                name: name.clone(),
                count: 2
            }
        );
        assert_eq!(
            series.next(key("train", Reason::ClusterLost), at(60 + 359)),
            Write::Count { name, count: 3 },
            "the window runs from the last one"
        );
    }

    #[test]
    fn after_the_window_a_new_event_is_created() {
        let mut series = Series::default();
        series.next(key("train", Reason::ClusterLost), at(0));
        let later = series.next(key("train", Reason::ClusterLost), at(360));
        assert!(matches!(later, Write::Create { .. }), "{later:?}");
    }

    #[test]
    fn what_ran_out_is_forgotten_as_events_are_published() {
        let mut series = Series::default();
        for i in 0..1000 {
            series.next(key(&format!("old-{i}"), Reason::Dispatched), at(0));
        }
        for i in 0..1000 {
            series.next(key(&format!("new-{i}"), Reason::Dispatched), at(400));
        }
        assert!(
            series.recent.len() <= 1100,
            "{} remembered; the old ones ran out",
            series.recent.len()
        );
        assert!(
            series
                .recent
                .contains_key(&key("new-999", Reason::Dispatched))
        );
    }
}
