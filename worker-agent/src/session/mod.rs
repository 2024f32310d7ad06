//! The agent's side of the Relay session: dial the manager, say Hello with the
//! inventory, then apply, delete and report until the session breaks; dial
//! again with exponential backoff and jitter.

use std::time::{Duration, Instant};

use jobrelay_proto::v1::relay_client::RelayClient;
use jobrelay_proto::v1::{
    AgentMessage, Heartbeat, Hello, ManagerMessage, agent_message, manager_message,
};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::transport::Channel;
use tracing::{info, warn};

mod cut_off;
mod ended;
mod welcome;

use crate::dial::{Dial, Redial};
use crate::epoch::Epochs;
use crate::fence;
use crate::logs::Logs;
use crate::metrics::DesiredSets;
use crate::mirrors::{Mirrors, Pass, agent_message};
use crate::room;
pub use cut_off::Fenced;
use cut_off::fence_due;
pub use ended::Ended;
use ended::chain;

/// Heartbeats missed before the manager counts as gone.
const MISSED_HEARTBEATS: u32 = 3;
/// Heartbeat interval until the manager's Welcome says otherwise.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(5);
/// Longest wait for a connection, its TLS handshake, or the manager's answer
/// to Hello: a manager that accepts and then says nothing (a paused
/// process) is given up on and the next endpoint tried.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(15);
/// Manager messages taken at once when they arrive together.
const MAX_BATCH: usize = 512;
/// Periodic pass over what waits on the clock, on top of the passes over
/// what the watches saw change (the orphan sweep brings a pass over
/// everything).
const SYNC_INTERVAL: Duration = Duration::from_secs(1);

pub struct Agent {
    pub dial: Dial,
    /// True while a session is open (for the readiness probe).
    pub connected: watch::Sender<bool>,
    /// Counts each DesiredSet and notes when the last came.
    pub desired_sets: DesiredSets,
    pub orphan_sweep_interval: Duration,
    pub cluster: String,
    pub origin: String,
    pub mirrors: Mirrors,
    /// The latest leader epoch a Welcome named; older ones are refused.
    pub epochs: Epochs,
    /// The manager instance an operator adopted (`--adopt-manager-instance`).
    pub adopted_instance: String,
    /// When the mirrors are fenced: the manager last heard, `fenceAfter`.
    pub fence: watch::Sender<fence::Clock>,
    /// What the fence stopped, while it is up.
    pub fenced: Fenced,
    /// The worker's room, which each session reports after its
    /// DesiredSet; `None`: no room reports (`--room=false`).
    pub room: Option<room::Feed>,
    /// The WorkerCluster's `terminatingPodTimeout`, as the latest Welcome
    /// said it, for the sweep of stuck Pods.
    pub terminating_pod_timeout: watch::Sender<Option<Duration>>,
    /// The worker's Warning Events about the mirrors, to tell each session;
    /// `None`: not watched (`--worker-events=false`).
    pub worker_events: Option<mpsc::Receiver<AgentMessage>>,
    /// The logs of the mirrors' Pods, streamed to the session that asks.
    pub logs: Logs,
}

impl Agent {
    /// The agent, reporting `room` on each session.
    pub fn reporting_room(self, room: Option<room::Feed>) -> Agent {
        Agent { room, ..self }
    }

    /// The agent, telling each session the worker's Warning Events about
    /// the mirrors that `events` yields.
    pub fn telling_worker_events(self, events: Option<mpsc::Receiver<AgentMessage>>) -> Agent {
        Agent {
            worker_events: events,
            ..self
        }
    }

    /// Holds a session to the manager forever, reconnecting with backoff;
    /// fences the mirrors once no manager was heard for `fenceAfter`.
    pub async fn run(mut self) {
        self.mirrors.wait_ready().await;
        let mut redial = Redial::new();
        loop {
            let started = Instant::now();
            let clock = self.fence.subscribe();
            let ended = tokio::select! {
                ended = self.attempt() => Some(ended),
                () = fence_due(clock) => None,
            };
            let ended = match ended {
                Some(ended) => ended,
                None => {
                    self.connected.send_replace(false);
                    // The session was cut off where it stood.
                    self.logs.end_session();
                    self.fence_now().await;
                    Ended::Fenced
                }
            };
            let delay = redial.after(&mut self.dial, started.elapsed());
            warn!(reason = %ended, retry_in = ?delay, "session ended");
            self.rest(delay).await;
        }
    }

    /// One try: dial the manager and hold a session; returns why it ended.
    async fn attempt(&mut self) -> Ended {
        let endpoint = match self.dial.endpoint() {
            Err(error) => return Ended::NoEndpoint(error.to_string()),
            Ok(endpoint) => endpoint,
        };
        match tokio::time::timeout(OPEN_TIMEOUT, endpoint.connect()).await {
            Ok(Ok(channel)) => {
                let ended = self.session(channel).await;
                self.connected.send_replace(false);
                ended
            }
            Ok(Err(error)) => Ended::Unreachable(chain(&error)),
            Err(_) => Ended::NoConnection(OPEN_TIMEOUT),
        }
    }

    /// One session; returns why it ended.
    async fn session(&mut self, channel: Channel) -> Ended {
        self.mirrors.new_session();
        let (outbox, queued) = mpsc::unbounded_channel::<AgentMessage>();
        let hello = Hello {
            cluster: self.cluster.clone(),
            agent_version: env!("CARGO_PKG_VERSION").into(),
            inventory: self.mirrors.inventory(),
            manager_instances: self.mirrors.manager_instances(),
            adopted_manager_instance: self.adopted_instance.clone(),
            kinds: self.mirrors.kinds(),
        };
        let inventory = hello.inventory.len();
        let _ = outbox.send(agent_message(agent_message::Kind::Hello(hello)));
        let opened = tokio::time::timeout(
            OPEN_TIMEOUT,
            RelayClient::new(channel).connect(UnboundedReceiverStream::new(queued)),
        )
        .await;
        let inbound = match opened {
            Err(_) => return Ended::NoAnswer(OPEN_TIMEOUT),
            Ok(Ok(response)) => response.into_inner(),
            Ok(Err(status)) => return Ended::Refused(status),
        };
        info!(inventory, "session open");
        // Log streams send beside the work, as the heartbeats do; each
        // queues at most its window of bytes.
        self.logs.start_session(outbox.clone());
        // Reading and heartbeats run beside the work, so a long pass never
        // makes either side look silent.
        let (heard, last_heard) = watch::channel(Instant::now());
        let (interval, heartbeat_interval) = watch::channel(DEFAULT_HEARTBEAT);
        let (reader, mut inbox) = spawn_reader(inbound, heard);
        // Each Heartbeat says what the agent holds as wanted by then.
        let holding = self.mirrors.holding();
        let beats = tokio::spawn(jobrelay_process::heartbeat::send_every(
            outbox.clone(),
            heartbeat_interval,
            move || {
                let holding = *holding.borrow();
                agent_message(agent_message::Kind::Heartbeat(Heartbeat { holding }))
            },
        ));
        let ended = self.work(&mut inbox, &outbox, &interval, &last_heard).await;
        self.logs.end_session();
        beats.abort();
        reader.abort();
        ended
    }

    /// Works the session's messages until it ends; returns why.
    async fn work(
        &mut self,
        inbox: &mut mpsc::UnboundedReceiver<Inbound>,
        outbox: &mpsc::UnboundedSender<AgentMessage>,
        interval: &watch::Sender<Duration>,
        last_heard: &watch::Receiver<Instant>,
    ) -> Ended {
        let mut syncs = tokio::time::interval(SYNC_INTERVAL);
        let mut sweeps = tokio::time::interval(self.orphan_sweep_interval);
        let mut out = Vec::new();
        let changes = self.mirrors.changes();
        // Like the Heartbeat's Holding, the room waits for the DesiredSet.
        let mut room_reports = self
            .room
            .as_ref()
            .map(|feed| feed.for_session(self.mirrors.holding()));
        loop {
            // The pass each wake-up brings, if any.
            let due = tokio::select! {
                received = inbox.recv() => match received {
                    Some(first) => match self.take(first, inbox, interval) {
                        Ok(()) => Some(Pass::Changes),
                        Err(ended) => return ended,
                    },
                    None => return Ended::ReaderStopped,
                },
                applied = self.mirrors.applied() => {
                    self.mirrors.take_answer(applied, &mut out);
                    None
                }
                () = changes.notified() => Some(Pass::Changes),
                report = room::next(room_reports.as_mut()) => {
                    out.push(report);
                    None
                }
                Some(told) = next_told(self.worker_events.as_mut()) => {
                    out.push(told);
                    None
                }
                () = self.dial.certificates_changed() => return Ended::CertificatesChanged,
                _ = syncs.tick() => {
                    if *self.connected.borrow() {
                        let heard = *last_heard.borrow();
                        self.fence.send_modify(|clock| clock.heard(heard));
                    }
                    let silent = last_heard.borrow().elapsed();
                    if silent > *interval.borrow() * MISSED_HEARTBEATS {
                        return Ended::Silent(silent);
                    }
                    Some(Pass::Tick)
                }
                _ = sweeps.tick() => {
                    self.mirrors.sweep_orphans();
                    Some(Pass::Full)
                }
            };
            if let Some(pass) = due
                && let Err(ended) = self.pass(pass, outbox, &mut out).await
            {
                return ended;
            }
            if let Err(ended) = send_all(outbox, &mut out) {
                return ended;
            }
        }
    }

    /// Takes `first` and whatever else has arrived with it, so a burst of
    /// applies is worked as one batch followed by one pass; anything but an
    /// apply comes after the applies before it.
    fn take(
        &mut self,
        first: Inbound,
        inbox: &mut mpsc::UnboundedReceiver<Inbound>,
        interval: &watch::Sender<Duration>,
    ) -> Result<(), Ended> {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match inbox.try_recv() {
                Ok(received) => batch.push(received),
                Err(_) => break,
            }
        }
        let mut applies = Vec::new();
        for received in batch {
            let kind = match received {
                Ok(Some(ManagerMessage { kind: Some(kind) })) => kind,
                Ok(Some(_)) => continue,
                Ok(None) => return Err(Ended::Closed),
                Err(status) => return Err(Ended::Stream(status)),
            };
            use manager_message::Kind as K;
            // Logs wait for no apply, and a credit splits no batch.
            let kind = match kind {
                K::ApplyMirror(apply) => {
                    applies.push(apply);
                    continue;
                }
                // Only a manager that welcomed this session reads the logs.
                K::LogOpen(open) if !*self.connected.borrow() => {
                    warn!(
                        stream = open.stream,
                        "a log stream asked for before Welcome; ignored"
                    );
                    continue;
                }
                K::LogOpen(open) => {
                    self.logs.open(open);
                    continue;
                }
                K::LogCredit(credit) => {
                    self.logs.credit(credit);
                    continue;
                }
                K::LogClose(close) => {
                    self.logs.close(close);
                    continue;
                }
                kind => kind,
            };
            self.mirrors.apply_all(std::mem::take(&mut applies));
            match kind {
                K::Welcome(welcome) => {
                    self.welcomed(&welcome).map_err(Ended::Unwelcome)?;
                    let every = welcome
                        .heartbeat_interval
                        .and_then(|d| Duration::try_from(d).ok())
                        .filter(|d| !d.is_zero());
                    if let Some(every) = every {
                        interval.send_replace(every);
                    }
                }
                K::DesiredSet(set) => {
                    info!(
                        mirrors = set.mirrors.len(),
                        released = set.released.len(),
                        after_lost = set.after_lost,
                        "desired set received"
                    );
                    self.desired_sets.received();
                    let desired = set.mirrors.into_iter().map(|m| (m.origin_uid, m.namespace));
                    self.mirrors
                        .set_desired(desired, set.released, set.after_lost);
                }
                K::DeleteMirror(delete) => self.mirrors.delete(delete),
                K::Heartbeat(_) => {}
                // Taken above.
                K::ApplyMirror(_) | K::LogOpen(_) | K::LogCredit(_) | K::LogClose(_) => {}
            }
        }
        self.mirrors.apply_all(applies);
        Ok(())
    }

    /// One pass over the mirrors: what it reports is on its way to the
    /// manager before the pass waits on the API server.
    async fn pass(
        &mut self,
        pass: Pass,
        outbox: &mpsc::UnboundedSender<AgentMessage>,
        out: &mut Vec<AgentMessage>,
    ) -> Result<(), Ended> {
        let look = self.mirrors.look(pass, out);
        // A closed stream ends the session: what the second half would have
        // done is done by the next session's passes.
        send_all(outbox, out)?;
        self.mirrors.act(look, out).await;
        Ok(())
    }
}

/// Hands every message in `out` to the outbound stream; says so if it closed.
fn send_all(
    outbox: &mpsc::UnboundedSender<AgentMessage>,
    out: &mut Vec<AgentMessage>,
) -> Result<(), Ended> {
    for message in out.drain(..) {
        if outbox.send(message).is_err() {
            return Err(Ended::OutboundClosed);
        }
    }
    Ok(())
}

/// The next Warning Event to tell; never, where none is watched.
async fn next_told(events: Option<&mut mpsc::Receiver<AgentMessage>>) -> Option<AgentMessage> {
    match events {
        Some(events) => events.recv().await,
        None => std::future::pending().await,
    }
}

/// What the reader hands over: a message, the end of the stream, or an error.
type Inbound = Result<Option<ManagerMessage>, tonic::Status>;

/// Reads the manager's stream into a channel, noting when each message came.
fn spawn_reader(
    mut inbound: tonic::Streaming<ManagerMessage>,
    heard: watch::Sender<Instant>,
) -> (
    tokio::task::JoinHandle<()>,
    mpsc::UnboundedReceiver<Inbound>,
) {
    let (forward, inbox) = mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        loop {
            let received = inbound.message().await;
            heard.send_replace(Instant::now());
            let last = !matches!(received, Ok(Some(_)));
            if forward.send(received).is_err() || last {
                return;
            }
        }
    });
    (reader, inbox)
}
