//! One simulated agent: a real session with the manager (its own client
//! certificate, TLS, Hello with its inventory, heartbeats, the agent's own
//! reconnect backoff and jitter), answering as a worker would — a mirror is
//! Running once applied and Complete after its run time, gone after a
//! cleanup delay drawn from a real worker's. No Kubernetes behind it: it
//! stands for the workers only, so the manager can be measured with many.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jobrelay_agent::{Dial, OPEN_TIMEOUT, Redial};
use jobrelay_proto::holding::OriginUids;
use jobrelay_proto::kinds::JOB;
use jobrelay_proto::v1::relay_client::RelayClient;
use jobrelay_proto::v1::{
    AgentMessage, Heartbeat, Hello, InventoryEntry, MirrorGone, MirrorPhase, MirrorStatus,
    agent_message, manager_message,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::transport::Channel;

use super::Record;
use super::worker::{self, CleanupDelays};
use crate::bench::shared::measure::Aborted;

/// A mirror the simulated worker holds.
#[derive(Debug, Clone)]
struct Held {
    revision: u64,
    phase: MirrorPhase,
    started: Timestamp,
    finished: Option<Timestamp>,
}

impl Held {
    /// Its status as the worker's Job shows it.
    fn status(&self) -> k8s_openapi::api::batch::v1::JobStatus {
        match self.finished {
            Some(finished) => worker::complete(self.started, finished),
            None => worker::running(self.started),
        }
    }
}

type Mirrors = Arc<Mutex<HashMap<String, Held>>>;

/// What the simulated agent holds as wanted in one session, as its
/// Heartbeats say (the manager compares it with what it wants): the
/// set-changing messages taken, and the set after them (none before the
/// session's DesiredSet).
type Wanted = Arc<Mutex<(u64, Option<OriginUids>)>>;

/// One simulated agent, dialling until its task is aborted.
pub struct Agent {
    pub cluster: String,
    pub dial: Dial,
    pub record: Arc<Record>,
    pub delays: Arc<CleanupDelays>,
}

impl Agent {
    /// Holds a session forever, as the real agent's loop does.
    pub async fn run(mut self) {
        let mirrors: Mirrors = Arc::default();
        let mut redial = Redial::new();
        loop {
            let started = Instant::now();
            if let Ok(endpoint) = self.dial.endpoint()
                && let Ok(Ok(channel)) =
                    tokio::time::timeout(OPEN_TIMEOUT, endpoint.connect()).await
            {
                self.session(channel, &mirrors).await;
            }
            let delay = redial.after(&mut self.dial, started.elapsed());
            tokio::time::sleep(delay).await;
        }
    }

    /// One session, until the manager ends it or goes silent.
    async fn session(&self, channel: Channel, mirrors: &Mirrors) {
        let (outbox, queued) = mpsc::unbounded_channel::<AgentMessage>();
        let hello = Hello {
            cluster: self.cluster.clone(),
            // The agents of this build (the manager refuses versions too far apart).
            agent_version: env!("CARGO_PKG_VERSION").into(),
            inventory: inventory(mirrors),
            kinds: vec![JOB.to_wire()],
            ..Default::default()
        };
        let _ = outbox.send(message(agent_message::Kind::Hello(hello)));
        let opened = tokio::time::timeout(
            OPEN_TIMEOUT,
            RelayClient::new(channel).connect(UnboundedReceiverStream::new(queued)),
        )
        .await;
        let Ok(Ok(response)) = opened else {
            return;
        };
        let mut inbound = response.into_inner();
        let (interval, every) = watch::channel(Duration::from_secs(5));
        let wanted: Wanted = Arc::default();
        let held = Arc::clone(&wanted);
        // Stopped with the session, even when the agent itself is stopped.
        let _beats = Aborted(tokio::spawn(jobrelay_process::heartbeat::send_every(
            outbox.clone(),
            every,
            move || {
                let (received, uids) = &*lock(&held);
                let holding = uids.as_ref().map(|u| u.summary().holding(*received));
                message(agent_message::Kind::Heartbeat(Heartbeat { holding }))
            },
        )));
        let session = self.record.session_opened(&self.cluster);
        loop {
            let silent = *interval.borrow() * 3;
            let next = tokio::time::timeout(silent, inbound.message()).await;
            let Ok(Ok(Some(received))) = next else {
                break;
            };
            let Some(kind) = received.kind else { continue };
            note_wanted(&wanted, &kind);
            self.answer(kind, session, mirrors, &outbox, &interval);
        }
    }

    /// What the worker does with one manager message.
    fn answer(
        &self,
        kind: manager_message::Kind,
        session: u64,
        mirrors: &Mirrors,
        outbox: &mpsc::UnboundedSender<AgentMessage>,
        interval: &watch::Sender<Duration>,
    ) {
        use manager_message::Kind as K;
        match kind {
            K::Welcome(welcome) => {
                if let Some(every) = welcome.heartbeat_interval {
                    let every =
                        Duration::new(every.seconds.max(0) as u64, every.nanos.max(0) as u32);
                    interval.send_replace(every);
                }
                self.record
                    .welcomed(&self.cluster, session, welcome.leader_epoch);
            }
            K::DesiredSet(desired) => {
                // What is not desired is swept at once.
                let wanted: std::collections::HashSet<String> =
                    desired.mirrors.into_iter().map(|m| m.origin_uid).collect();
                lock(mirrors).retain(|uid, _| wanted.contains(uid));
                self.record.desired(&self.cluster, session);
            }
            K::ApplyMirror(apply) => self.apply(apply, mirrors, outbox),
            K::DeleteMirror(delete) => {
                self.record.delete_received(&delete.origin_uid);
                // Weak: a timer does not keep an ended session's stream open.
                let (mirrors, outbox) = (Arc::clone(mirrors), outbox.downgrade());
                let delay = self.delays.draw(&delete.origin_uid);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    lock(&mirrors).remove(&delete.origin_uid);
                    let gone = MirrorGone {
                        origin_uid: delete.origin_uid,
                        pods_deleted: 1,
                    };
                    if let Some(outbox) = outbox.upgrade() {
                        let _ = outbox.send(message(agent_message::Kind::MirrorGone(gone)));
                    }
                });
            }
            // A simulated worker runs no containers: it has no logs.
            K::Heartbeat(_) | K::LogOpen(_) | K::LogCredit(_) | K::LogClose(_) => {}
        }
    }

    /// A mirror applied: Running at once, Complete after its run time.
    fn apply(
        &self,
        apply: jobrelay_proto::v1::ApplyMirror,
        mirrors: &Mirrors,
        outbox: &mpsc::UnboundedSender<AgentMessage>,
    ) {
        self.record.applied(&self.cluster, &apply.origin_uid);
        let uid = apply.origin_uid.clone();
        // A mirror applied again (a new revision, or a replay) keeps its run.
        let held = {
            let mut mirrors = lock(mirrors);
            let held = mirrors.entry(uid.clone()).or_insert_with(|| Held {
                revision: apply.revision,
                phase: MirrorPhase::Running,
                started: Timestamp::now(),
                finished: None,
            });
            held.revision = apply.revision;
            held.clone()
        };
        let _ = outbox.send(status(&uid, &held));
        if held.finished.is_some() {
            return;
        }
        let run_for = serde_json::from_slice::<Job>(&apply.object)
            .ok()
            .as_ref()
            .and_then(worker::run_for);
        let Some(run_for) = run_for else { return };
        let (mirrors, outbox, record) = (
            Arc::clone(mirrors),
            outbox.downgrade(),
            Arc::clone(&self.record),
        );
        tokio::spawn(async move {
            tokio::time::sleep(run_for).await;
            let Some(held) = lock(&mirrors).get_mut(&uid).map(|held| {
                held.phase = MirrorPhase::Succeeded;
                held.finished = Some(Timestamp::now());
                held.clone()
            }) else {
                return;
            };
            record.completed(&uid);
            if let Some(outbox) = outbox.upgrade() {
                let _ = outbox.send(status(&uid, &held));
            }
        });
    }
}

/// The Hello's inventory: every mirror held, with its revision and phase.
fn inventory(mirrors: &Mirrors) -> Vec<InventoryEntry> {
    lock(mirrors)
        .iter()
        .map(|(uid, held)| InventoryEntry {
            origin_uid: uid.clone(),
            revision: held.revision,
            phase: held.phase.into(),
            kind: Some(JOB.to_wire()),
            namespace: String::new(),
        })
        .collect()
}

fn status(uid: &str, held: &Held) -> AgentMessage {
    message(agent_message::Kind::MirrorStatus(MirrorStatus {
        origin_uid: uid.into(),
        revision: held.revision,
        phase: held.phase.into(),
        status: serde_json::to_vec(&held.status()).unwrap_or_default(),
        unschedulable: None,
        pods: None,
    }))
}

fn message(kind: agent_message::Kind) -> AgentMessage {
    AgentMessage { kind: Some(kind) }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Notes what a manager message changes of what the agent holds as wanted.
fn note_wanted(wanted: &Wanted, kind: &manager_message::Kind) {
    use manager_message::Kind as K;
    let (received, uids) = &mut *lock(wanted);
    match kind {
        K::DesiredSet(desired) => {
            *uids = Some(
                desired
                    .mirrors
                    .iter()
                    .map(|m| m.origin_uid.clone())
                    .collect(),
            );
        }
        K::ApplyMirror(apply) => {
            if let Some(uids) = uids {
                uids.insert(apply.origin_uid.clone());
            }
        }
        K::DeleteMirror(delete) => {
            if let Some(uids) = uids {
                uids.remove(&delete.origin_uid);
            }
        }
        K::Welcome(_) | K::Heartbeat(_) | K::LogOpen(_) | K::LogCredit(_) | K::LogClose(_) => {
            return;
        }
    }
    *received += 1;
}
