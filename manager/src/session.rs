//! The `jobrelay.v1.Relay` service: one session per connected agent, admitted
//! only once the manager's caches are synced. The session answers Hello with
//! Welcome and the DesiredSet, then feeds what the agent reports into the [`Fleet`] and sends
//! heartbeats. A silent agent is dropped after a few heartbeat intervals.
//! Each session runs in its own task, so a slow agent holds up no other.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use jobrelay_proto::v1::relay_server::Relay;
use jobrelay_proto::v1::{AgentMessage, Heartbeat, Hello, ManagerMessage, manager_message::Kind};
use tokio::sync::{mpsc, oneshot, watch};
use tonic::{Request, Response, Status, Streaming};
use tracing::{Instrument, info_span, warn};

use crate::clusters::agent_certificates::AgentCertificates;
use crate::clusters::certificate_pin::PinRefusal;
use crate::clusters::registry::Registry;
use crate::fleet::{Fleet, message};
use crate::kinds::stores::Stores;
use crate::outbox::Outbox;
use crate::telemetry::events::Events;
use crate::telemetry::metrics::Metrics;
use jobrelay_process::{Peer, PeerCertificate, RefusedConnection};
use k8s_openapi::jiff::Timestamp;

mod admission;
mod anti_entropy;
pub mod budget;
mod certificate;
mod desired;
mod drift;
pub mod limits;
mod reports;
pub mod wanted;
mod welcome;

use admission::{Dismissal, versions_match};
use limits::TooLarge;

/// Heartbeats missed before a session is dropped.
const MISSED_HEARTBEATS: u32 = 3;

/// Why a session ended, for the log.
#[derive(Debug, thiserror::Error)]
enum Ended {
    #[error("the manager is shutting down")]
    ShuttingDown,
    #[error("silent for {0:?}")]
    Silent(Duration),
    #[error("stream error: {0}")]
    Stream(Status),
    #[error("agent closed the session")]
    ClosedByAgent,
    #[error("its WorkerCluster was deleted")]
    Unregistered,
    #[error("a second Hello in one session")]
    SecondHello,
    #[error("it read too slowly: {0} messages were waiting for it")]
    FellBehind(usize),
    #[error("it sent {0}")]
    TooLarge(TooLarge),
    #[error("it sent {0}")]
    OverBudget(budget::OverBudget),
    #[error("its client certificate expired at {0}")]
    CertificateExpired(Timestamp),
    #[error("{0}")]
    CertificateRefused(PinRefusal),
}

impl Ended {
    /// What the agent is told, and the metric label, when the session was
    /// cut by a limit; `None` for every other end.
    fn cut(&self) -> Option<Dismissal> {
        match self {
            Ended::FellBehind(_) => Some(Dismissal::new(
                "outbox_full",
                Status::resource_exhausted(format!("session ended: {self}; dial again to resync")),
            )),
            Ended::TooLarge(_) => Some(Dismissal::new(
                "message_too_large",
                Status::resource_exhausted(format!("session ended: {self}")),
            )),
            Ended::OverBudget(_) => Some(Dismissal::new(
                "over_budget",
                Status::resource_exhausted(format!("session ended: {self}")),
            )),
            Ended::CertificateExpired(_) => Some(Dismissal::new(
                "certificate_expired",
                Status::unauthenticated(format!(
                    "session ended: {self}; dial again with a renewed certificate"
                )),
            )),
            Ended::CertificateRefused(refused @ PinRefusal::Invalid(_)) => Some(Dismissal::new(
                refused.reason(),
                Status::failed_precondition(format!("session ended: {self}")),
            )),
            Ended::CertificateRefused(refused) => Some(Dismissal::new(
                refused.reason(),
                Status::permission_denied(format!("session ended: {self}")),
            )),
            _ => None,
        }
    }
}

/// The gRPC service; cheap to clone, all sessions share one [`Sessions`].
#[derive(Clone)]
pub struct RelayService {
    pub sessions: Arc<Sessions>,
}

/// What one session may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// How long a peer has for its Hello once its stream is open.
    pub hello_timeout: Duration,
    /// Messages queued for one agent before it counts as fallen behind.
    pub outbox_capacity: usize,
    /// What one session may send a second.
    pub rates: budget::Rates,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            hello_timeout: limits::DEFAULT_HELLO_TIMEOUT,
            outbox_capacity: crate::outbox::DEFAULT_CAPACITY,
            rates: budget::Rates::default(),
        }
    }
}

/// What every session needs.
pub struct Sessions {
    pub registry: Registry,
    /// Agents must present a client certificate (false only with
    /// `--insecure-plaintext`).
    pub tls: bool,
    pub metrics: Arc<Metrics>,
    pub fleet: Arc<Fleet>,
    pub stores: Stores,
    /// Turns true once the stores have listed everything.
    pub synced: tokio::sync::watch::Receiver<bool>,
    pub events: Events,
    pub origin: String,
    /// This installation's identity ([`crate::instance`]), for the Welcome.
    pub instance: String,
    pub heartbeat_interval: Duration,
    /// `retention.remoteAfterFinished`: finished Jobs keep their mirror this long.
    pub remote_retention: Duration,
    pub limits: SessionLimits,
    /// Ends every session, so agents find the manager that takes over.
    pub shutdown: jobrelay_process::Shutdown,
    /// Open while this replica leads (always, without leader election): no
    /// session opens, and no message goes out, once it is closed.
    pub fence: jobrelay_process::Fence,
    /// The epoch this replica leads in, for the Welcome.
    pub epoch: tokio::sync::watch::Receiver<crate::leader::Epoch>,
    /// What each cluster's agent certificate was judged.
    pub certificates: Arc<AgentCertificates>,
    /// Marked changed whenever a WorkerCluster changes (once in `registry`),
    /// so a session whose pin changed is judged again.
    pub clusters_changed: tokio::sync::watch::Receiver<()>,
    /// What the manager wants on each cluster, for the agents' Heartbeats.
    pub wanted: wanted::WantedCache,
    /// Turns to have a Hello read ([`limits::HELLO_READS_AT_ONCE`]).
    pub hello_reads: tokio::sync::Semaphore,
    /// The log streams open through the sessions ([`crate::log_streams`]).
    pub logs: Arc<crate::log_streams::LogStreams>,
}

type ManagerStream = Pin<Box<dyn Stream<Item = Result<ManagerMessage, Status>> + Send>>;

#[tonic::async_trait]
impl Relay for RelayService {
    type ConnectStream = ManagerStream;

    async fn connect(
        &self,
        request: Request<Streaming<AgentMessage>>,
    ) -> Result<Response<ManagerStream>, Status> {
        let peer = request.extensions().get::<Peer>().cloned();
        let clusters_changed = self.sessions.clusters_changed.clone();
        let mut inbound = request.into_inner();
        let timeout = self.sessions.limits.hello_timeout;
        let registered = |name: &str| self.sessions.registry.get(name).is_some();
        let first = match admission::names_a_registered_cluster(
            self.sessions.tls,
            peer.as_ref(),
            registered,
        ) {
            Ok(()) => {
                let read = async {
                    let _turn = self.sessions.hello_reads.acquire().await;
                    inbound.message().await
                };
                Ok(tokio::time::timeout(timeout, read).await.ok())
            }
            Err(unknown) => Err(unknown),
        };
        let admitted = first
            .and_then(|first| limits::hello(first, timeout))
            .and_then(|hello| {
                self.sessions.admit(peer.as_ref(), &hello.cluster)?;
                versions_match(&hello.agent_version)?;
                self.sessions.instance_taken(&hello)?;
                Ok(hello)
            });
        let hello = match admitted {
            Ok(hello) => hello,
            Err(Dismissal { reason, status }) => {
                let addr = peer.map(|p| p.addr.to_string()).unwrap_or_default();
                warn!(%addr, reason, message = status.message(), "session refused");
                self.sessions.metrics.refused(reason);
                return Err(status);
            }
        };
        let (outbox, queued) = Outbox::new(self.sessions.limits.outbox_capacity);
        let welcome = self.sessions.welcome(&hello.cluster);
        let _ = outbox.send(message(Kind::Welcome(welcome)));
        let (cut, cut_status) = oneshot::channel();
        let span =
            info_span!("session", cluster = %hello.cluster, agent_version = %hello.agent_version);
        let certificate = peer.and_then(|p| p.certificate);
        tokio::spawn(
            Arc::clone(&self.sessions)
                .serve(hello, certificate, clusters_changed, inbound, outbox, cut)
                .instrument(span),
        );
        let fence = self.sessions.fence.clone();
        Ok(Response::new(Box::pin(response(queued, cut_status, fence))))
    }
}

/// The session's messages to the agent, until the session is cut by a
/// limit: then the messages still queued are dropped and the agent gets
/// the status that says why. Nothing goes out once `fence` closes (this
/// replica no longer leads): the session ends then, with UNAVAILABLE.
fn response(
    queued: mpsc::Receiver<ManagerMessage>,
    cut: oneshot::Receiver<Status>,
    fence: jobrelay_process::Fence,
) -> impl Stream<Item = Result<ManagerMessage, Status>> + Send {
    let messages = unfenced_response(queued, cut);
    futures::stream::unfold(Some((Box::pin(messages), fence)), |state| async move {
        let (mut messages, fence) = state?;
        let next = messages.next().await?;
        if next.is_ok() && !fence.is_open(tokio::time::Instant::now()) {
            let stepped_down = Status::unavailable(
                "this manager replica no longer leads; dial again to reach the leader",
            );
            return Some((Err(stepped_down), None));
        }
        Some((next, Some((messages, fence))))
    })
}

fn unfenced_response(
    queued: mpsc::Receiver<ManagerMessage>,
    cut: oneshot::Receiver<Status>,
) -> impl Stream<Item = Result<ManagerMessage, Status>> + Send {
    futures::stream::unfold(Some((queued, Some(cut))), |state| async move {
        let (mut queued, cut) = state?;
        let Some(mut cut) = cut else {
            let next = queued.recv().await?;
            return Some((Ok(next), Some((queued, None))));
        };
        tokio::select! {
            biased;
            status = &mut cut => match status {
                Ok(status) => Some((Err(status), None)),
                // Ended otherwise: what is queued still goes out.
                Err(_) => {
                    let next = queued.recv().await?;
                    Some((Ok(next), Some((queued, None))))
                }
            },
            next = queued.recv() => Some((Ok(next?), Some((queued, Some(cut))))),
        }
    })
}

impl Sessions {
    async fn serve(
        self: Arc<Self>,
        hello: Hello,
        certificate: Option<PeerCertificate>,
        clusters_changed: watch::Receiver<()>,
        mut inbound: Streaming<AgentMessage>,
        outbox: Outbox,
        cut: oneshot::Sender<Status>,
    ) {
        let cluster = hello.cluster.clone();
        // Heartbeats run in a task of their own, beside the session's work.
        let (_interval, every) = tokio::sync::watch::channel(self.heartbeat_interval);
        let heartbeats = tokio::spawn(jobrelay_process::heartbeat::send_every(
            outbox.clone(),
            every,
            || message(Kind::Heartbeat(Heartbeat::default())),
        ));
        let welcomes = tokio::spawn(Arc::clone(&self).keep_welcome_current(
            cluster.clone(),
            clusters_changed.clone(),
            outbox.clone(),
        ));
        let (desired, released) = desired::for_cluster(
            &self.stores,
            &cluster,
            self.remote_retention,
            &hello.inventory,
        );
        tracing::info!(
            inventory = hello.inventory.len(),
            desired = desired.len(),
            released = released.len(),
            "agent connected"
        );
        // The kinds first: the cluster takes objects once it is connected.
        self.fleet.set_kinds(&cluster, &hello.kinds);
        let session = self.fleet.connect(
            &cluster,
            &hello.agent_version,
            &hello.inventory,
            desired,
            released,
            outbox.clone(),
        );
        // Jobs that waited for a cluster are placed now, not at their next
        // requeue (a new leader's first sessions, a cluster back).
        self.fleet
            .trigger_all(desired::awaiting_placement(&self.stores));

        let mut anti_entropy = anti_entropy::AntiEntropy {
            session,
            outbox: outbox.clone(),
            drift: drift::Drift::default(),
            deletions_held: None,
        };
        let silence = self.heartbeat_interval * MISSED_HEARTBEATS;
        let mut budget = budget::Budget::new(self.limits.rates, tokio::time::Instant::now());
        let mut certificate_ends =
            std::pin::pin!(self.certificate_ends(&cluster, certificate, clusters_changed));
        let reason = loop {
            let received = tokio::select! {
                received = tokio::time::timeout(silence, inbound.message()) => received,
                ended = &mut certificate_ends => break ended,
                () = outbox.fell_behind() => break Ended::FellBehind(self.limits.outbox_capacity),
                () = self.shutdown.clone().requested() => break Ended::ShuttingDown,
            };
            match received {
                Err(_) => break Ended::Silent(silence),
                Ok(Err(status)) => break Ended::Stream(status),
                Ok(Ok(None)) => break Ended::ClosedByAgent,
                Ok(Ok(Some(AgentMessage { kind: Some(kind) }))) => {
                    let size = match limits::within_limit(&kind) {
                        Ok(size) => size,
                        Err(too_large) => break Ended::TooLarge(too_large),
                    };
                    if let Err(over) = budget.charge(size, tokio::time::Instant::now()) {
                        break Ended::OverBudget(over);
                    }
                    if self.registry.get(&cluster).is_none() {
                        break Ended::Unregistered;
                    }
                    self.fleet.heard(&cluster);
                    if let Err(why) = self.receive(&cluster, kind, &mut anti_entropy).await {
                        break why;
                    }
                }
                Ok(Ok(Some(_))) => {}
            }
        };
        heartbeats.abort();
        welcomes.abort();
        match reason.cut() {
            Some(Dismissal {
                reason: label,
                status,
            }) => {
                let over_budget = matches!(reason, Ended::OverBudget(_));
                self.fleet
                    .cut(&cluster, session, reason.to_string(), over_budget);
                self.metrics.session_cut(label);
                let _ = cut.send(status);
            }
            None => self.fleet.disconnect(&cluster, session),
        }
        self.logs.session_ended(&cluster, session);
        warn!(%reason, "agent disconnected");
    }
}

/// Logs a connection the Relay refused before any gRPC: a peer's
/// certificate at warn, so a misconfigured agent shows; a limit at debug,
/// since a flood would otherwise flood the log too (the metric counts both).
pub fn log_refused_connection(connection: &RefusedConnection) {
    let RefusedConnection {
        addr,
        reason,
        detail,
    } = connection;
    if connection.by_limit() {
        tracing::debug!(%addr, reason, %detail, "connection refused");
    } else {
        warn!(%addr, reason, %detail, "TLS handshake refused");
    }
}
