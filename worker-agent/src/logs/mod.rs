//! The logs of a mirror's Pods, served to the manager over the session
//! (`kubectl jobrelay logs` on the manager): a LogOpen names the mirror and
//! what to read of it, the agent answers with LogData until the logs end,
//! the manager closes the stream (LogClose), or the session ends — every
//! stream of a session ends with it.
//!
//! Which Pods and containers are read is chosen from the agent's caches of
//! its mirrors and their Pods (`choose`); each stream's task reads them from
//! the worker's API server (`read`), sends at most its window of bytes the
//! manager has not credited (`window`), and all streams together keep to
//! one pace (`pace`), well inside what the manager takes of a session.

mod choose;
mod lines;
mod pace;
mod read;
mod window;

use std::collections::HashMap;

use jobrelay_proto::v1::{
    AgentMessage, LogClose, LogCredit, LogData, LogEnd, LogEndReason, LogOpen, agent_message,
};
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::Api;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{Instrument, debug, info};

use crate::kinds::{self, objects::Objects};
use crate::metrics::LogMetrics;
use crate::watched::Watched;
use choose::{Mirror, PodFacts, Target};

/// Log streams the agent serves at once. A session is the agent's only
/// one and its streams end with it, so this bounds the agent: each stream
/// holds one read of the API server per Pod it reads and at most its window
/// (`window::MAX_WINDOW`) of bytes queued on the session.
pub const MAX_STREAMS: usize = 8;

/// Where the logs are read, and what is counted of them.
pub struct Logs {
    client: kube::Client,
    cluster: String,
    /// The caches of this origin's mirrors and their Pods.
    objects: Objects,
    pods: Watched<Pod>,
    pace: pace::LogPace,
    metrics: LogMetrics,
    /// The session's outbound stream, while one is open.
    outbox: Option<mpsc::UnboundedSender<AgentMessage>>,
    /// The session's open streams, by the manager's stream number.
    streams: HashMap<u64, Stream>,
}

/// An open stream: where its credits go, and its task.
struct Stream {
    credits: watch::Sender<u64>,
    task: JoinHandle<()>,
}

impl Drop for Stream {
    /// A stream dropped (closed, or its session ended) sends nothing more.
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Logs {
    pub fn new(
        client: kube::Client,
        cluster: String,
        objects: Objects,
        pods: Watched<Pod>,
        metrics: LogMetrics,
    ) -> Self {
        Logs {
            client,
            cluster,
            objects,
            pods,
            pace: pace::LogPace::default(),
            metrics,
            outbox: None,
            streams: HashMap::new(),
        }
    }

    /// A session opened: its streams go to `outbox`.
    pub fn start_session(&mut self, outbox: mpsc::UnboundedSender<AgentMessage>) {
        self.streams.clear();
        self.outbox = Some(outbox);
    }

    /// The session ended, and every stream of it.
    pub fn end_session(&mut self) {
        self.streams.clear();
        self.outbox = None;
    }

    /// Opens the stream `open` asks for, or ends it at once saying why.
    pub fn open(&mut self, open: LogOpen) {
        let Some(outbox) = self.outbox.clone() else {
            return;
        };
        let span = tracing::info_span!(
            "log_stream",
            stream = open.stream,
            namespace = %open.namespace,
            origin_uid = %open.origin_uid,
        );
        let _entered = span.enter();
        match self.targets(&open) {
            Ok(targets) => {
                info!(
                    pods = targets.len(),
                    follow = open.follow,
                    "log stream open"
                );
                let stream = self.spawn(&open, targets, outbox, span.clone());
                self.streams.insert(open.stream, stream);
            }
            Err(end) => {
                info!(reason = ?end.reason(), message = %end.message, "log stream refused");
                let _ = outbox.send(log_data(open.stream, Vec::new(), Some(end)));
            }
        }
    }

    /// What `open` reads, if it may open now.
    fn targets(&mut self, open: &LogOpen) -> Result<Vec<Target>, LogEnd> {
        self.streams.retain(|_, stream| !stream.task.is_finished());
        let already_open = self.streams.contains_key(&open.stream);
        if already_open {
            // A number reused while open: that stream ends too, and the
            // refusal is its last message.
            self.streams.remove(&open.stream);
        }
        admit(self.streams.len(), already_open, &self.cluster)?;
        choose::targets(open, &self.mirror(open), &self.pods_of(open))
    }

    /// The task that serves `open`'s `targets`, counted open while it lives.
    fn spawn(
        &self,
        open: &LogOpen,
        targets: Vec<Target>,
        outbox: mpsc::UnboundedSender<AgentMessage>,
        span: tracing::Span,
    ) -> Stream {
        let (credits, credited) = watch::channel(0);
        let serving = read::Serving {
            stream: open.stream,
            pods: Api::namespaced(self.client.clone(), &open.namespace),
            targets,
            prefixed: open.all_pods,
            params: read::params(open),
            window: window::Window::asked(open.window),
            credited,
            outbox,
            pace: self.pace.clone(),
            bytes_sent: self.metrics.bytes_sent.clone(),
        };
        let counted = Counted::on(self.metrics.streams.clone());
        let task = tokio::spawn(
            async move {
                let _counted = counted;
                read::serve(serving).await;
            }
            .instrument(span),
        );
        Stream { credits, task }
    }

    /// The manager took more of a stream; credits for a stream not open
    /// are ignored.
    pub fn credit(&mut self, credit: LogCredit) {
        if let Some(stream) = self.streams.get(&credit.stream) {
            stream
                .credits
                .send_modify(|total| *total = total.saturating_add(credit.bytes));
        }
    }

    /// The manager's reader went away: the stream's task stops.
    pub fn close(&mut self, close: LogClose) {
        if self.streams.remove(&close.stream).is_some() {
            debug!(stream = close.stream, "log stream closed");
        }
    }

    /// The mirror `open` asks for, as the caches show it.
    fn mirror(&self, open: &LogOpen) -> Mirror {
        let uid = &open.origin_uid;
        let found = self
            .objects
            .of([uid])
            .remove(uid)
            .into_iter()
            .flatten()
            .find(|o| {
                let meta = o.object_meta();
                meta.namespace.as_ref() == Some(&open.namespace) && kinds::parent(meta).is_none()
            })
            .map(|o| {
                let name = o.object_meta().name.clone().unwrap_or_default();
                (o.kind_name().kind.to_string(), name)
            });
        Mirror {
            cluster: self.cluster.clone(),
            namespace: open.namespace.clone(),
            origin_uid: uid.clone(),
            found,
        }
    }

    /// The Pods of the mirror `open` asks for, in its namespace.
    fn pods_of(&self, open: &LogOpen) -> Vec<PodFacts> {
        let uid = &open.origin_uid;
        let pods = self.pods.of([uid]).remove(uid).unwrap_or_default();
        let in_namespace =
            |pod: &&std::sync::Arc<Pod>| pod.meta().namespace.as_ref() == Some(&open.namespace);
        pods.iter()
            .filter(in_namespace)
            .map(|pod| PodFacts::of(pod))
            .collect()
    }
}

/// Whether a stream may open beside `open` others; a stream number already
/// open is refused (a manager's mistake).
fn admit(open: usize, already_open: bool, cluster: &str) -> Result<(), LogEnd> {
    if already_open {
        return Err(ended(
            LogEndReason::Invalid,
            "a stream of that number was open on this session; both end".to_string(),
        ));
    }
    if open >= MAX_STREAMS {
        return Err(ended(
            LogEndReason::TooMany,
            format!(
                "the agent of cluster {cluster} serves {open} log streams, \
                 as many as it serves at once ({MAX_STREAMS}); try again when one ends"
            ),
        ));
    }
    Ok(())
}

/// A stream counted open on the gauge while it lives.
struct Counted(Gauge);

impl Counted {
    fn on(gauge: Gauge) -> Counted {
        gauge.inc();
        Counted(gauge)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A stream's end for `reason`, telling the user `message`.
fn ended(reason: LogEndReason, message: String) -> LogEnd {
    LogEnd {
        reason: reason as i32,
        message,
    }
}

/// A stream's message to the manager.
fn log_data(stream: u64, data: Vec<u8>, end: Option<LogEnd>) -> AgentMessage {
    let data = LogData { stream, data, end };
    AgentMessage {
        kind: Some(agent_message::Kind::LogData(data)),
    }
}

#[cfg(test)]
mod tests;
