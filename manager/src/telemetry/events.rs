//! Kubernetes Events on manager Jobs, one reason per step of a mirror's life,
//! and on the WorkerClusters and the Lease for what concerns them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch};
use tokio::sync::mpsc;

use crate::kinds::Key;
use prometheus_client::metrics::counter::Counter;
use tokio_stream::wrappers::ReceiverStream;

pub use crate::reason::{JobEvents, Reason};

/// Publishes Events (`events.k8s.io/v1`) as `jobrelay-manager`. The same
/// reason on the same Job within [`SERIES_WINDOW`] of the last one becomes a
/// series on the first Event (its count goes up), as Kubernetes' own event
/// recorders do. What is remembered for that is a few bytes per Event, kept
/// until the Job is deleted or its window ran out; forgetting what ran out
/// is paid for in proportion to what is published — a manager publishing for
/// thousands of Jobs a minute keeps neither a copy of every Event nor a scan
/// of them per Event.
///
/// At most [`WRITERS`] Event writes are in flight: the manager's requests
/// share one flow of the API server's priority and fairness, and a burst of
/// Events must not queue ahead of the status and dispatch writes users wait
/// for. An Event waits for its turn instead — in a queue of at most
/// [`QUEUED`]: past it (a flood of reports, an API server that stopped
/// answering) an Event is dropped and counted, never held.
#[derive(Clone)]
pub struct Events {
    recorded: JobEvents,
    series: Arc<Mutex<Series>>,
    queue: mpsc::Sender<Queued>,
    /// Events dropped because the queue was full.
    dropped: Counter,
}

/// Event writes in flight at most.
const WRITERS: usize = 4;
/// Events waiting for their write at most: a few megabytes of notes.
pub const QUEUED: usize = 4096;

/// How long after an Event the same reason on the same Job adds to it.
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

const CONTROLLER: &str = "jobrelay-manager";

impl Events {
    /// Events written with `client`, signed by `instance`, as many as
    /// `recorded` says; a task of their own writes them (so this is called
    /// inside a Tokio runtime).
    pub fn new(client: kube::Client, instance: &str, recorded: JobEvents) -> Self {
        let (queue, queued) = mpsc::channel(QUEUED);
        let instance: Arc<str> = instance.into();
        tokio::spawn(
            ReceiverStream::new(queued).for_each_concurrent(WRITERS, move |queued| {
                write(client.clone(), Arc::clone(&instance), queued)
            }),
        );
        Events {
            recorded,
            series: Arc::default(),
            queue,
            dropped: Counter::default(),
        }
    }

    /// The count of Events dropped because the queue was full, for the
    /// metrics.
    pub fn dropped(&self) -> Counter {
        self.dropped.clone()
    }

    /// Records `reason` on the Job, at once as far as the caller is
    /// concerned: the write waits for its turn in the queue, which holds no
    /// more of it than the Event needs. A failure to record is logged, never
    /// fatal. An Event `--job-events` leaves out is not recorded at all.
    pub fn publish(&self, job: &ObjectReference, reason: Reason, note: String) {
        self.publish_on(job, reason, "", note);
    }

    /// Records `reason` on the Job as [`Events::publish`] does, in a series
    /// of its own per `topic`: the same reason about another thing (another
    /// reason a worker gave) is not counted into the first one's series.
    pub fn publish_on(&self, job: &ObjectReference, reason: Reason, topic: &str, note: String) {
        if !self.recorded.records(reason) {
            return;
        }
        let at = Timestamp::now();
        let (uid, name) = (
            job.uid.as_deref().unwrap_or_default(),
            job.name.as_deref().unwrap_or_default(),
        );
        // A place in the queue first: a dropped Event leaves its series as
        // it was.
        let place = match self.queue.try_reserve() {
            Ok(place) => place,
            Err(mpsc::error::TrySendError::Full(())) => {
                let before = self.dropped.inc();
                if before.is_power_of_two() || before == 0 {
                    tracing::warn!(
                        reason = reason.as_str(),
                        job = name,
                        dropped = before + 1,
                        "{QUEUED} Events wait for their write; Event dropped"
                    );
                }
                return;
            }
            Err(mpsc::error::TrySendError::Closed(())) => {
                tracing::warn!(
                    reason = reason.as_str(),
                    job = name,
                    "the Event writer stopped; Event not recorded"
                );
                return;
            }
        };
        let topic = topic_key(topic);
        let write = self.series().next(uid, name, (reason, topic), at);
        place.send(Queued {
            job: job.clone(),
            reason,
            note,
            at,
            write,
        });
    }

    /// Forgets the series of a Job that is gone: nothing is published on it
    /// again.
    pub fn forget(&self, uid: &str) {
        self.series().forget(uid);
    }

    fn series(&self) -> std::sync::MutexGuard<'_, Series> {
        self.series.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An Event waiting for its turn to be written.
struct Queued {
    job: ObjectReference,
    reason: Reason,
    note: String,
    at: Timestamp,
    write: Write,
}

/// Writes one queued Event.
async fn write(client: kube::Client, instance: Arc<str>, queued: Queued) {
    let Queued {
        job,
        reason,
        note,
        at,
        write,
    } = queued;
    let namespace = job.namespace.clone().unwrap_or_else(|| "default".into());
    let events: Api<K8sEvent> = Api::namespaced(client, &namespace);
    let written = match write {
        Write::Create { name } => {
            let event = K8sEvent {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(namespace),
                    ..Default::default()
                },
                action: Some(reason.as_str().into()),
                reason: Some(reason.as_str().into()),
                note: Some(note),
                event_time: Some(MicroTime(at)),
                regarding: Some(job.clone()),
                reporting_controller: Some(CONTROLLER.into()),
                reporting_instance: Some(instance.to_string()),
                type_: Some(reason.event_type().into()),
                ..Default::default()
            };
            events
                .create(&crate::field_manager::post(), &event)
                .await
                .map(drop)
        }
        Write::Count { name, count } => {
            let series = serde_json::json!({
                "series": {"count": count, "lastObservedTime": MicroTime(at)},
            });
            events
                .patch(
                    &name,
                    &crate::field_manager::patch(),
                    &Patch::Merge(&series),
                )
                .await
                .map(drop)
        }
    };
    if let Err(error) = written {
        tracing::warn!(%error, reason = reason.as_str(), job = ?job.name, "could not record Event");
    }
}

/// The Events published lately, as much as a series needs of them: per Job
/// UID, the last Event of each reason.
#[derive(Debug, Default)]
struct Series {
    recent: HashMap<Box<str>, Vec<Published>>,
    /// Jobs in `recent` after the last sweep; the next one comes when they
    /// have doubled, so sweeping costs a constant per Event published.
    swept_at_size: usize,
}

/// What tells a series from another on one Job: its reason, and a hash of
/// its topic (0 for none).
type Subject = (Reason, u64);

/// A topic's key in a series: a hash, so a series keeps a few bytes.
fn topic_key(topic: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    if topic.is_empty() {
        return 0;
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    topic.hash(&mut hasher);
    hasher.finish()
}

/// The last Event of one subject on one Job.
#[derive(Debug, Clone, PartialEq)]
struct Published {
    subject: Subject,
    count: i32,
    /// When the Event was created, which its name holds.
    first: Timestamp,
    /// When the series last counted one more.
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
    /// Decides the write for `subject` published on the Job `uid` named
    /// `name` at `now`, and remembers it.
    fn next(&mut self, uid: &str, name: &str, subject: Subject, now: Timestamp) -> Write {
        let event_name = |first: Timestamp| format!("{name}.{:x}", first.as_nanosecond());
        if uid.is_empty() {
            // Nothing tells this object from another of its name.
            return Write::Create {
                name: event_name(now),
            };
        }
        if self.recent.len() >= 2 * self.swept_at_size.max(64) {
            self.recent.retain(|_, published| {
                published.retain(|p| within_window(p.last, now));
                !published.is_empty()
            });
            self.swept_at_size = self.recent.len();
        }
        let published = match self.recent.get_mut(uid) {
            Some(published) => published,
            None => self.recent.entry(uid.into()).or_default(),
        };
        if let Some(p) = published
            .iter_mut()
            .find(|p| p.subject == subject && within_window(p.last, now))
        {
            p.count += 1;
            p.last = now;
            return Write::Count {
                name: event_name(p.first),
                count: p.count,
            };
        }
        // A series that ran out gives way to a new one.
        published.retain(|p| p.subject != subject);
        published.push(Published {
            subject,
            count: 1,
            first: now,
            last: now,
        });
        Write::Create {
            name: event_name(now),
        }
    }

    fn forget(&mut self, uid: &str) {
        self.recent.remove(uid);
    }
}

fn within_window(last: Timestamp, now: Timestamp) -> bool {
    now.duration_since(last)
        < SignedDuration::try_from(SERIES_WINDOW).unwrap_or(SignedDuration::MAX)
}

/// A reference to a relayed manager object from its key and UID.
pub fn object_reference(key: &Key, uid: &str) -> ObjectReference {
    let (kind, namespace, name) = (key.kind, &key.namespace, &key.name);
    let api_version = format!("{}/{}", kind.group, kind.version);
    ObjectReference {
        api_version: Some(api_version),
        kind: Some(kind.kind.into()),
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        uid: Some(uid.into()),
        ..Default::default()
    }
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
