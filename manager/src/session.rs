//! The `jobrelay.v1.Relay` service: one session per connected agent, admitted
//! only once the manager's caches are synced. The session answers Hello with
//! Welcome and the DesiredSet, then feeds what the agent reports into the [`Fleet`] and sends
//! heartbeats. A silent agent is dropped after a few heartbeat intervals.
//! Each session runs in its own task, so a slow agent holds up no other.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use jobrelay_proto::v1::relay_server::Relay;
use jobrelay_proto::v1::{
    AgentMessage, DesiredMirror, Heartbeat, Hello, ManagerMessage, MirrorPhase, Welcome,
    agent_message, manager_message::Kind,
};
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use tracing::{Instrument, debug, info, info_span, warn};

use crate::events::{Events, Reason, job_reference};
use crate::fleet::{Fleet, Outbox, message};
use crate::fleet_views::Rejection;
use crate::metrics::Metrics;
use crate::mirror::is_relayed;
use crate::placement::assigned_cluster;
use crate::registry::Registry;
use crate::retention::keeps_mirror;
use crate::status;
use jobrelay_process::{Peer, PeerIdentity};
use k8s_openapi::jiff::Timestamp;

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
}

/// The gRPC service; cheap to clone, all sessions share one [`Sessions`].
#[derive(Clone)]
pub struct RelayService {
    pub sessions: Arc<Sessions>,
}

/// What every session needs.
pub struct Sessions {
    pub registry: Registry,
    /// Agents must present a client certificate (false only with
    /// `--insecure-plaintext`).
    pub tls: bool,
    pub metrics: Arc<Metrics>,
    pub fleet: Arc<Fleet>,
    pub jobs: Store<Job>,
    /// Turns true once `jobs` has listed every Job.
    pub synced: tokio::sync::watch::Receiver<bool>,
    pub events: Events,
    pub origin: String,
    pub heartbeat_interval: Duration,
    /// `retention.remoteAfterFinished`: finished Jobs keep their mirror this long.
    pub remote_retention: Duration,
    /// Ends every session, so agents find the manager that takes over.
    pub shutdown: jobrelay_process::Shutdown,
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
        let mut inbound = request.into_inner();
        let hello = match inbound.message().await? {
            Some(AgentMessage {
                kind: Some(agent_message::Kind::Hello(hello)),
            }) => hello,
            _ => {
                return Err(Status::invalid_argument(
                    "the first message of a session must be Hello",
                ));
            }
        };
        let admitted = self
            .sessions
            .admit(peer.as_ref(), &hello.cluster)
            .and_then(|()| versions_match(&hello.agent_version));
        if let Err((reason, status)) = admitted {
            let addr = peer.map(|p| p.addr.to_string()).unwrap_or_default();
            warn!(%addr, cluster = %hello.cluster, reason, message = status.message(), "session refused");
            self.sessions.metrics.refused(reason);
            return Err(status);
        }
        let (outbox, queued) = mpsc::unbounded_channel();
        let welcome = Welcome {
            heartbeat_interval: prost_types::Duration::try_from(self.sessions.heartbeat_interval)
                .ok(),
            manager_version: env!("CARGO_PKG_VERSION").into(),
            origin: self.sessions.origin.clone(),
        };
        let _ = outbox.send(message(Kind::Welcome(welcome)));
        let span =
            info_span!("session", cluster = %hello.cluster, agent_version = %hello.agent_version);
        tokio::spawn(
            Arc::clone(&self.sessions)
                .serve(hello, inbound, outbox)
                .instrument(span),
        );
        Ok(Response::new(Box::pin(
            UnboundedReceiverStream::new(queued).map(Ok),
        )))
    }
}

/// Refuses an agent whose version this manager does not take
/// ([`jobrelay_proto::skew`]).
fn versions_match(agent_version: &str) -> Result<(), (&'static str, Status)> {
    jobrelay_proto::skew::check(env!("CARGO_PKG_VERSION"), agent_version).map_err(|skew| {
        (
            "version_skew",
            Status::failed_precondition(skew.to_string()),
        )
    })
}

impl Sessions {
    /// Decides whether an agent may open a session as `cluster`: its
    /// certificate must be trusted and name `cluster`, and `cluster` must be
    /// a registered WorkerCluster. A refusal comes with a metric label.
    fn admit(&self, peer: Option<&Peer>, cluster: &str) -> Result<(), (&'static str, Status)> {
        if cluster.is_empty() {
            return Err((
                "invalid_hello",
                Status::invalid_argument("Hello.cluster is empty"),
            ));
        }
        if self.tls {
            match peer.map(|p| &p.identity) {
                None => {
                    return Err((
                        "no_certificate",
                        Status::unauthenticated("no verified client certificate"),
                    ));
                }
                Some(PeerIdentity::Refused(refusal, detail)) => {
                    return Err((
                        refusal.as_str(),
                        Status::unauthenticated(format!("client certificate refused: {detail}")),
                    ));
                }
                Some(PeerIdentity::Verified(names)) if !names.iter().any(|n| n == cluster) => {
                    return Err((
                        "cluster_mismatch",
                        Status::permission_denied(format!(
                            "the Hello claims cluster {cluster}, but the client certificate names {}",
                            names.join(", ")
                        )),
                    ));
                }
                Some(PeerIdentity::Verified(_)) => {}
            }
        }
        // An empty DesiredSet from a cold cache would read as "delete all".
        if !*self.synced.borrow() {
            return Err((
                "not_ready",
                Status::unavailable("the manager is starting; its caches are not synced yet"),
            ));
        }
        if self.registry.get(cluster).is_none() {
            return Err((
                "unknown_cluster",
                Status::permission_denied(format!(
                    "no WorkerCluster named {cluster} is registered with this manager"
                )),
            ));
        }
        Ok(())
    }

    async fn serve(
        self: Arc<Self>,
        hello: Hello,
        mut inbound: Streaming<AgentMessage>,
        outbox: Outbox,
    ) {
        let cluster = hello.cluster.clone();
        // Heartbeats run in a task of their own, beside the session's work.
        let (_interval, every) = tokio::sync::watch::channel(self.heartbeat_interval);
        let heartbeats = tokio::spawn(jobrelay_process::heartbeat::send_every(
            outbox.clone(),
            every,
            || message(Kind::Heartbeat(Heartbeat {})),
        ));
        let desired = desired_set(&self.jobs, &cluster, self.remote_retention);
        info!(
            inventory = hello.inventory.len(),
            desired = desired.len(),
            "agent connected"
        );
        let session = self.fleet.connect(
            &cluster,
            &hello.agent_version,
            &hello.inventory,
            desired,
            outbox,
        );
        // Jobs that waited for a cluster are placed now, not at their next
        // requeue (a new leader's first sessions, a cluster back).
        self.fleet.trigger_all(
            self.jobs
                .state()
                .iter()
                .filter(|job| crate::placement::awaits_placement(job))
                .map(|job| ObjectRef::from_obj(&**job)),
        );

        let silence = self.heartbeat_interval * MISSED_HEARTBEATS;
        let reason = loop {
            let received = tokio::select! {
                received = tokio::time::timeout(silence, inbound.message()) => received,
                () = self.shutdown.clone().requested() => break Ended::ShuttingDown,
            };
            match received {
                Err(_) => break Ended::Silent(silence),
                Ok(Err(status)) => break Ended::Stream(status),
                Ok(Ok(None)) => break Ended::ClosedByAgent,
                Ok(Ok(Some(AgentMessage { kind: Some(kind) }))) => {
                    if self.registry.get(&cluster).is_none() {
                        break Ended::Unregistered;
                    }
                    self.fleet.heard(&cluster);
                    if let Err(why) = self.receive(&cluster, kind).await {
                        break why;
                    }
                }
                Ok(Ok(Some(_))) => {}
            }
        };
        heartbeats.abort();
        self.fleet.disconnect(&cluster, session);
        warn!(%reason, "agent disconnected");
    }

    async fn receive(&self, cluster: &str, kind: agent_message::Kind) -> Result<(), Ended> {
        use agent_message::Kind as K;
        match kind {
            K::Hello(_) => return Err(Ended::SecondHello),
            K::Heartbeat(_) => {}
            K::MirrorStatus(report) => {
                let copied = match status::copied(&report.status) {
                    Ok(copied) => Some(copied),
                    Err(error) => {
                        warn!(uid = %report.origin_uid, %error, "unreadable JobStatus from agent");
                        None
                    }
                };
                let phase = report.phase();
                let finished_at = copied
                    .as_ref()
                    .and_then(|c| status::newly_finished_at(None, c));
                let Some((before, held_after)) = self.fleet.record_status(
                    cluster,
                    &report.origin_uid,
                    report.revision,
                    phase,
                    copied.as_ref().map(status::Kept::new),
                ) else {
                    debug!(uid = %report.origin_uid, "status of a mirror not placed here; dropped");
                    self.metrics.report_dropped(cluster);
                    return Ok(());
                };
                if let Some(took) = held_after {
                    self.metrics.dispatched(cluster, took);
                }
                if before != phase
                    && let Some(at) = finished_at
                {
                    let took = Timestamp::now().duration_since(at);
                    self.metrics
                        .status_heard(cluster, Duration::try_from(took).unwrap_or_default());
                }
                if before != phase {
                    let reason = match phase {
                        MirrorPhase::Succeeded => Some((
                            Reason::RemoteFinished,
                            format!("Job complete on cluster {cluster}"),
                        )),
                        MirrorPhase::Failed => Some((
                            Reason::RemoteFinished,
                            format!("Job failed on cluster {cluster}"),
                        )),
                        _ => None,
                    };
                    if let Some((reason, note)) = reason {
                        self.publish(cluster, &report.origin_uid, reason, note);
                    }
                }
            }
            K::MirrorGone(gone) => {
                match self
                    .fleet
                    .record_gone(cluster, &gone.origin_uid, gone.pods_deleted)
                {
                    Some(Some(took)) => self.metrics.cleaned_up(cluster, took),
                    Some(None) => {}
                    None => debug!(uid = %gone.origin_uid, "swept orphan confirmed gone"),
                }
            }
            K::MirrorLost(lost) => {
                warn!(uid = %lost.origin_uid, mirror_uid = %lost.mirror_uid, observed = %lost.observed, "mirror lost on the worker");
                self.metrics.mirror_lost(cluster);
                if self
                    .fleet
                    .record_lost(cluster, &lost.origin_uid, &lost.mirror_uid, &lost.observed)
                    .is_none()
                {
                    self.metrics.report_dropped(cluster);
                }
            }
            K::ApplyRejected(rejected) => {
                let reason = rejected.reason();
                let retry_in = rejected
                    .retry_in
                    .and_then(|d| std::time::Duration::try_from(d).ok());
                let permanent = reason.is_permanent();
                self.metrics
                    .apply_refused(cluster, reason.as_str_name(), permanent);
                let (event, then) = if permanent {
                    (Reason::RemoteRejected, "the Job fails".to_string())
                } else {
                    let next = retry_in
                        .map_or_else(String::new, |d| format!(" in {}s", d.as_secs_f64().ceil()));
                    (
                        Reason::DispatchWaiting,
                        format!("its agent tries again{next}"),
                    )
                };
                let note = format!(
                    "cluster {cluster} refused the Job ({}): {}; {then}",
                    reason.as_str_name(),
                    rejected.message
                );
                warn!(uid = %rejected.origin_uid, %note, "apply rejected");
                let rejection = Rejection {
                    revision: rejected.revision,
                    reason,
                    message: rejected.message,
                    retry_in,
                };
                if self
                    .fleet
                    .record_rejected(cluster, &rejected.origin_uid, rejection)
                    .is_some()
                {
                    self.publish(cluster, &rejected.origin_uid, event, note);
                } else {
                    self.metrics.report_dropped(cluster);
                }
            }
        }
        Ok(())
    }

    /// Records an Event on the mirror's manager Job; the Event waits for its
    /// write in the Events queue, so the session keeps reading meanwhile.
    fn publish(&self, cluster: &str, uid: &str, reason: Reason, note: String) {
        if let Some(key) = self.fleet.key_of(cluster, uid) {
            let namespace = key.namespace.as_deref().unwrap_or_default();
            let job = job_reference(namespace, &key.name, uid);
            self.events.publish(&job, reason, note);
        }
    }
}

/// The mirrors `cluster` should hold: its active Jobs, and finished ones
/// whose remote retention has not run out.
fn desired_set(
    jobs: &Store<Job>,
    cluster: &str,
    remote_retention: Duration,
) -> Vec<(DesiredMirror, ObjectRef<Job>)> {
    let now = Timestamp::now();
    jobs.state()
        .iter()
        .filter(|job| {
            is_relayed(job)
                && assigned_cluster(job) == Some(cluster)
                && keeps_mirror(job, now, remote_retention)
        })
        .filter_map(|job| {
            let mirror = DesiredMirror {
                origin_uid: job.uid()?,
            };
            Some((mirror, ObjectRef::from_obj(job.as_ref())))
        })
        .collect()
}
