//! The room on this worker cluster, for the manager to place Jobs by: what
//! its schedulable nodes have left for Pods, by node pool
//! (`jobrelay_kinds::room`), and with `--room-kueue` what the worker's own
//! Kueue has free, by ClusterQueue. Watches feed it — Nodes, the bound,
//! non-terminal Pods of every namespace, and ClusterQueues and LocalQueues
//! — trimmed to what room is summed from ([`seen`], [`queues`]); each
//! change is summed again after a short pause and the latest room
//! published, with how many Pods of each mirror it counts, for every
//! session to send ([`reports`]).
//!
//! Where the agent may not read Nodes or Pods, the room stays unknown and no
//! Room is sent; where it may not read Kueue's queues, the Room names none
//! ([`access`]). `--room=false` starts no watch at all.

mod access;
mod queues;
mod reports;
mod seen;

use std::collections::HashMap;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use jobrelay_kinds::room::Room;
use jobrelay_process::Tasks;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher::Config};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::initial_list;
use crate::metrics::RoomMetrics;
use access::{Access, Read, Turned};
use queues::Queues;
pub use reports::{Feed, next};
use seen::Seen;

/// Pods that take room: bound to a node and not finished.
pub const BOUND_AND_LIVE: &str = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";

/// How long changes gather before the room is summed again: a burst of
/// Pods starting is one recount, not one each.
const GATHER: Duration = Duration::from_millis(100);

/// The room as summed, and how many Pods of each mirror (by origin UID)
/// it counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Summed {
    pub room: Room,
    pub counted: Arc<HashMap<String, u32>>,
}

/// Starts the room's watches among `tasks`, those of the worker's Kueue
/// with `kueue`; the room they publish (`None` until Nodes and Pods have
/// listed, and while either is refused).
pub fn watch(
    client: &kube::Client,
    metrics: &RoomMetrics,
    kueue: bool,
    tasks: &Tasks,
) -> watch::Receiver<Option<Summed>> {
    let (published, room) = watch::channel(None);
    let every = Config::default().timeout(jobrelay_process::WATCH_TIMEOUT_SECS);
    let nodes = initial_list::watch(Api::<Node>::all(client.clone()), every.clone());
    let pods = initial_list::watch(
        Api::<Pod>::all(client.clone()),
        every.clone().fields(BOUND_AND_LIVE),
    );
    let kueue_watch = |kind: &str| -> BoxStream<'static, Answer<DynamicObject>> {
        if !kueue {
            return futures::stream::pending().boxed();
        }
        let api = Api::<DynamicObject>::all_with(client.clone(), &queues::resource(kind));
        initial_list::watch(api, every.clone())
            .default_backoff()
            .boxed()
    };
    let summing = Summing {
        seen: Seen::default(),
        queues: kueue.then(Queues::default),
        access: Default::default(),
        known: false,
        published,
        metrics: metrics.clone(),
        events: Read::ALL.map(|read| metrics.watch_events(read.kind())),
    };
    tasks.spawn(summing.follow(
        nodes.default_backoff(),
        pods.default_backoff(),
        kueue_watch(Read::ClusterQueues.kind()),
        kueue_watch(Read::LocalQueues.kind()),
    ));
    room
}

/// The room as the watches show it, and where it is published.
struct Summing {
    seen: Seen,
    /// With `--room-kueue`.
    queues: Option<Queues>,
    /// Whether each read is refused, in [`Read::ALL`]'s order.
    access: [Access; Read::ALL.len()],
    /// Whether the room was known when last published.
    known: bool,
    published: watch::Sender<Option<Summed>>,
    metrics: RoomMetrics,
    /// Watch events taken, in [`Read::ALL`]'s order.
    events: [Counter; Read::ALL.len()],
}

type Answer<K> = Result<Event<K>, watcher::Error>;

impl Summing {
    /// Takes the watches' events until they end, publishing the room a
    /// moment after each change.
    async fn follow(
        mut self,
        nodes: impl Stream<Item = Answer<Node>>,
        pods: impl Stream<Item = Answer<Pod>>,
        cluster_queues: impl Stream<Item = Answer<DynamicObject>>,
        local_queues: impl Stream<Item = Answer<DynamicObject>>,
    ) {
        let (mut nodes, mut pods) = (pin!(nodes), pin!(pods));
        let (mut cluster_queues, mut local_queues) = (pin!(cluster_queues), pin!(local_queues));
        let mut due: Option<Instant> = None;
        loop {
            let changed = tokio::select! {
                Some(answer) = nodes.next() => self.take(Read::Nodes, answer, Seen::node),
                Some(answer) = pods.next() => self.take(Read::Pods, answer, Seen::pod),
                Some(answer) = cluster_queues.next() => {
                    self.take_queue(Read::ClusterQueues, answer, Queues::cluster_queue)
                }
                Some(answer) = local_queues.next() => {
                    self.take_queue(Read::LocalQueues, answer, Queues::local_queue)
                }
                () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                    due = None;
                    self.publish();
                    false
                }
                else => return,
            };
            if changed && due.is_none() {
                due = Some(Instant::now() + GATHER);
            }
        }
    }

    /// Takes a watch's answer for `read` into what is seen with `take`;
    /// says whether the room may have changed.
    fn take<K>(
        &mut self,
        read: Read,
        answer: Answer<K>,
        take: impl FnOnce(&mut Seen, Event<K>) -> bool,
    ) -> bool {
        match self.event(read, answer) {
            Ok((event, granted)) => take(&mut self.seen, event) || granted,
            Err(changed) => changed,
        }
    }

    /// [`Self::take`] for the worker's Kueue's queues.
    fn take_queue(
        &mut self,
        read: Read,
        answer: Answer<DynamicObject>,
        take: impl FnOnce(&mut Queues, Event<DynamicObject>) -> bool,
    ) -> bool {
        match self.event(read, answer) {
            Ok((event, granted)) => self.queues.as_mut().is_some_and(|q| take(q, event)) || granted,
            Err(changed) => changed,
        }
    }

    /// The event of an answer and whether it turned a refusal; or, for an
    /// error, whether that changed the room.
    fn event<K>(&mut self, read: Read, answer: Answer<K>) -> Result<(Event<K>, bool), bool> {
        match answer {
            Ok(event) => {
                self.events[read as usize].inc();
                Ok((event, self.answered(read, false)))
            }
            Err(error) => {
                let refused = access::refused(&error);
                if !refused {
                    warn!(kind = read.kind(), %error, "room watch error; retrying");
                }
                Err(self.answered(read, refused))
            }
        }
    }

    /// Notes whether `read` was refused; says whether that turned.
    fn answered(&mut self, read: Read, refused: bool) -> bool {
        match self.access[read as usize].answered(refused) {
            Turned::Same => false,
            Turned::Refused => {
                warn!(
                    kind = read.kind(),
                    missing = read.permission(),
                    "the agent may not read {}s, so {}. Grant {} ({}), or {}",
                    read.kind(),
                    read.without(),
                    read.permission(),
                    read.chart_value(),
                    read.turn_off(),
                );
                true
            }
            Turned::Granted => {
                info!(
                    kind = read.kind(),
                    "the agent may read {}s again",
                    read.kind()
                );
                true
            }
        }
    }

    /// Publishes the room as it is now, if it differs from the last.
    fn publish(&mut self) {
        let refused = |read: Read| self.access[read as usize].refused();
        let readable = !(refused(Read::Nodes) || refused(Read::Pods));
        let queues_readable = !(refused(Read::ClusterQueues) || refused(Read::LocalQueues));
        let queues = self
            .queues
            .as_ref()
            .filter(|_| queues_readable)
            .and_then(Queues::queues)
            .unwrap_or_default();
        let room = self
            .seen
            .pools()
            .filter(|_| readable)
            .map(|pools| Room { pools, queues });
        let summed = room.as_ref().map(|room| Summed {
            room: room.clone(),
            counted: Arc::new(self.seen.counted().clone()),
        });
        let pools = room.as_ref().map_or(0, |room| room.pools.len());
        self.metrics
            .pools
            .set(i64::try_from(pools).unwrap_or(i64::MAX));
        let (nodes, pods) = self.seen.counts();
        match (self.known, room.is_some()) {
            (false, true) => info!(
                pools,
                nodes, pods, "room known; reporting it to the manager"
            ),
            (true, false) => info!("room no longer known; reporting none"),
            _ => debug!(pools, nodes, pods, "room summed"),
        }
        self.known = room.is_some();
        self.published.send_if_modified(|latest| {
            let changed = *latest != summed;
            if changed {
                *latest = summed;
            }
            changed
        });
    }
}
