//! The room on this worker cluster, for the manager to place Jobs by: what
//! its schedulable nodes have left for Pods, by node pool
//! (`jobrelay_kinds::room`). Two watches feed it — Nodes, and the bound,
//! non-terminal Pods of every namespace — trimmed to what room is summed
//! from ([`seen`]); each change is summed again after a short pause and the
//! latest room published, for every session to send ([`reports`]).
//!
//! Where the agent may not read Nodes or Pods, the room stays unknown and no
//! Room is sent ([`access`]); `--room=false` starts no watch at all.

mod access;
mod reports;
mod seen;

use std::pin::pin;
use std::time::Duration;

use futures::{Stream, StreamExt};
use jobrelay_kinds::room::Pool;
use jobrelay_process::Tasks;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher::Config};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::initial_list;
use crate::metrics::RoomMetrics;
use access::{Access, Read, Turned};
pub use reports::{Feed, next};
use seen::Seen;

/// Pods that take room: bound to a node and not finished.
pub const BOUND_AND_LIVE: &str = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";

/// How long changes gather before the room is summed again: a burst of
/// Pods starting is one recount, not one each.
const GATHER: Duration = Duration::from_millis(500);

/// Starts the room's watches among `tasks`; the room they publish (`None`
/// until both have listed, and while either is refused).
pub fn watch(
    client: &kube::Client,
    metrics: &RoomMetrics,
    tasks: &Tasks,
) -> watch::Receiver<Option<Vec<Pool>>> {
    let (published, room) = watch::channel(None);
    let every = Config::default().timeout(jobrelay_process::WATCH_TIMEOUT_SECS);
    let nodes = initial_list::watch(Api::<Node>::all(client.clone()), every.clone());
    let pods = initial_list::watch(
        Api::<Pod>::all(client.clone()),
        every.fields(BOUND_AND_LIVE),
    );
    let summing = Summing {
        seen: Seen::default(),
        nodes: Access::default(),
        pods: Access::default(),
        known: false,
        published,
        metrics: metrics.clone(),
        node_events: metrics.watch_events(Read::Nodes.kind()),
        pod_events: metrics.watch_events(Read::Pods.kind()),
    };
    tasks.spawn(summing.follow(nodes.default_backoff(), pods.default_backoff()));
    room
}

/// The room as the watches show it, and where it is published.
struct Summing {
    seen: Seen,
    nodes: Access,
    pods: Access,
    /// Whether the room was known when last published.
    known: bool,
    published: watch::Sender<Option<Vec<Pool>>>,
    metrics: RoomMetrics,
    node_events: Counter,
    pod_events: Counter,
}

type Answer<K> = Result<Event<K>, watcher::Error>;

impl Summing {
    /// Takes the watches' events until they end, publishing the room a
    /// moment after each change.
    async fn follow(
        mut self,
        nodes: impl Stream<Item = Answer<Node>>,
        pods: impl Stream<Item = Answer<Pod>>,
    ) {
        let (mut nodes, mut pods) = (pin!(nodes), pin!(pods));
        let mut due: Option<Instant> = None;
        loop {
            let changed = tokio::select! {
                Some(answer) = nodes.next() => self.node(answer),
                Some(answer) = pods.next() => self.pod(answer),
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

    /// Takes a Node watch's answer; says whether the room may have changed.
    fn node(&mut self, answer: Answer<Node>) -> bool {
        let event = match answer {
            Ok(event) => event,
            Err(error) => return self.failed(Read::Nodes, &error),
        };
        self.node_events.inc();
        let granted = self.answered(Read::Nodes, false);
        self.seen.node(event) || granted
    }

    /// Takes a Pod watch's answer; says whether the room may have changed.
    fn pod(&mut self, answer: Answer<Pod>) -> bool {
        let event = match answer {
            Ok(event) => event,
            Err(error) => return self.failed(Read::Pods, &error),
        };
        self.pod_events.inc();
        let granted = self.answered(Read::Pods, false);
        self.seen.pod(event) || granted
    }

    fn failed(&mut self, read: Read, error: &watcher::Error) -> bool {
        let refused = access::forbidden(error);
        if !refused {
            warn!(kind = read.kind(), %error, "room watch error; retrying");
        }
        self.answered(read, refused)
    }

    /// Notes whether `read` was refused; says whether that turned.
    fn answered(&mut self, read: Read, refused: bool) -> bool {
        let access = match read {
            Read::Nodes => &mut self.nodes,
            Read::Pods => &mut self.pods,
        };
        match access.answered(refused) {
            Turned::Same => false,
            Turned::Refused => {
                warn!(
                    kind = read.kind(),
                    missing = read.permission(),
                    "the agent may not read {}s, so it reports no room: the manager places on this cluster without asking whether Pods fit. Grant {} (the chart does with agent.room.enabled), or turn room reports off with --room=false",
                    read.kind(),
                    read.permission(),
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
        let readable = !(self.nodes.refused() || self.pods.refused());
        let room = self.seen.pools().filter(|_| readable);
        let pools = room.as_ref().map_or(0, Vec::len);
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
            let changed = *latest != room;
            if changed {
                *latest = room;
            }
            changed
        });
    }
}
