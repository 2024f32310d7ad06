//! One log stream's task: reads its Pods' containers from the worker's API
//! server (`pods/log`), several at once, and sends what they say to the
//! manager within the stream's window and the agent's pace; its last
//! message says how it ended.

use std::pin::Pin;

use futures::io::AsyncBufRead;
use futures::{AsyncBufReadExt, FutureExt, Stream, StreamExt, stream};
use jobrelay_proto::v1::{AgentMessage, LogEnd, LogEndReason, LogOpen};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, watch};
use tracing::debug;

use super::choose::{PODS_AT_ONCE, Target};
use super::lines::Lines;
use super::pace::LogPace;
use super::window::{CHUNK_BYTES, Window, chunk_len};
use super::{ended, log_data};
use crate::report::cut_short;

/// Bytes of the message a failed stream ends with at most.
const MESSAGE_BYTES: usize = 4096;

/// What a stream's task needs.
pub struct Serving {
    pub stream: u64,
    /// The Pods of the mirror's namespace.
    pub pods: Api<Pod>,
    pub targets: Vec<Target>,
    /// Every target's lines are prefixed (`all_pods`).
    pub prefixed: bool,
    /// The read's parameters but the container.
    pub params: LogParams,
    pub window: Window,
    /// Every byte the manager credited so far; gone once the stream closed.
    pub credited: watch::Receiver<u64>,
    pub outbox: mpsc::UnboundedSender<AgentMessage>,
    pub pace: LogPace,
    pub bytes_sent: Counter,
}

/// The parameters of `pods/log` a LogOpen asks for, but the container.
pub fn params(open: &LogOpen) -> LogParams {
    LogParams {
        follow: open.follow,
        tail_lines: open.tail_lines,
        since_seconds: open.since_seconds,
        previous: open.previous,
        timestamps: open.timestamps,
        ..LogParams::default()
    }
}

/// A read that did not reach the end of its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFailure {
    pub target: Target,
    /// The API server answered 404: the Pod (or its container) is gone.
    pub not_found: bool,
    /// The API server's message, or what broke the read.
    pub message: String,
}

/// What the reads yield: that one opened, bytes to send, or a read's
/// failure.
enum Piece {
    Opened,
    Data(Vec<u8>),
    Failed(ReadFailure),
}

/// Serves the stream to its end; sends nothing more once it is closed.
pub async fn serve(mut serving: Serving) {
    let targets = serving.targets.len();
    let reads = stream::iter(std::mem::take(&mut serving.targets))
        .map(|target| {
            let lines = match serving.prefixed {
                true => Lines::prefixed(&target.pod, &target.container),
                false => Lines::raw(),
            };
            read(serving.pods.clone(), target, serving.params.clone(), lines).boxed()
        })
        .flatten_unordered(PODS_AT_ONCE);
    let mut reads = std::pin::pin!(reads);
    let mut pending: Vec<u8> = Vec::new();
    let mut failures = Vec::new();
    let mut read_all = false;
    // The manager answers its caller once the first read opened (or the
    // stream ended): an empty message says so before any log.
    let mut told_opened = false;
    loop {
        // Waits for something to send; then takes what else is there, up
        // to a chunk, without waiting.
        while !read_all && pending.len() < CHUNK_BYTES {
            let next = match pending.is_empty() {
                true => reads.next().await,
                false => match reads.next().now_or_never() {
                    Some(next) => next,
                    None => break,
                },
            };
            match next {
                Some(Piece::Opened) if !told_opened => {
                    told_opened = true;
                    if !send(&serving, Vec::new(), None) {
                        return;
                    }
                }
                Some(Piece::Opened) => {}
                Some(Piece::Data(data)) => pending.extend_from_slice(&data),
                Some(Piece::Failed(failure)) => failures.push(failure),
                None => read_all = true,
            }
        }
        if pending.is_empty() {
            break;
        }
        let Some(room) = room(&mut serving.window, &mut serving.credited).await else {
            return;
        };
        let len = chunk_len(pending.len(), room);
        serving.pace.take(len).await;
        let rest = pending.split_off(len);
        let data = std::mem::replace(&mut pending, rest);
        if !send(&serving, data, None) {
            return;
        }
        serving.window.sent(len);
        serving.bytes_sent.inc_by(len as u64);
    }
    let end = end_of(&failures, targets);
    debug!(reason = ?end.reason(), message = %end.message, "log stream ended");
    send(&serving, Vec::new(), Some(end));
}

/// Room in the window, with every credit come so far, once there is some;
/// `None` once the stream closed.
async fn room(window: &mut Window, credited: &mut watch::Receiver<u64>) -> Option<u64> {
    loop {
        window.credited_in_all(*credited.borrow_and_update());
        if window.room() > 0 {
            return Some(window.room());
        }
        credited.changed().await.ok()?;
    }
}

/// Hands a message of the stream to the session; false once the stream or
/// the session is closed.
fn send(serving: &Serving, data: Vec<u8>, end: Option<LogEnd>) -> bool {
    let closed = serving.credited.has_changed().is_err();
    !closed
        && serving
            .outbox
            .send(log_data(serving.stream, data, end))
            .is_ok()
}

/// How a stream of `targets` reads ended, from the failures among them:
/// DONE without any; NOT_FOUND where every failure is a 404; else FAILED.
/// The message is the API server's (it names the Pod and container) for a
/// stream of one; each failed read's, named, for a stream of several.
pub fn end_of(failures: &[ReadFailure], targets: usize) -> LogEnd {
    if failures.is_empty() {
        return ended(LogEndReason::Done, String::new());
    }
    let reason = match failures.iter().all(|f| f.not_found) {
        true => LogEndReason::NotFound,
        false => LogEndReason::Failed,
    };
    let message = match (targets, failures) {
        (1, [only]) => only.message.clone(),
        _ => failures
            .iter()
            .map(|f| {
                let Target { pod, container } = &f.target;
                format!("pod/{pod}/{container}: {}", f.message)
            })
            .collect::<Vec<_>>()
            .join("; "),
    };
    ended(reason, cut_short(&message, MESSAGE_BYTES))
}

type LogReader = Pin<Box<dyn AsyncBufRead + Send>>;

/// A read of one Pod's container, as pieces: its log, then its failure if
/// it did not reach the end.
fn read(
    pods: Api<Pod>,
    target: Target,
    mut params: LogParams,
    lines: Lines,
) -> impl Stream<Item = Piece> + Send {
    enum State {
        Start(Box<(Api<Pod>, LogParams)>),
        Reading(LogReader),
        Failed(ReadFailure),
        Done,
    }
    params.container = Some(target.container.clone());
    let state = (State::Start(Box::new((pods, params))), lines, target);
    stream::unfold(state, |(mut state, mut lines, target)| async move {
        loop {
            let (piece, next) = match state {
                State::Done => return None,
                State::Failed(failure) => (Piece::Failed(failure), State::Done),
                State::Start(start) => match start.0.log_stream(&target.pod, &start.1).await {
                    Ok(reader) => (Piece::Opened, State::Reading(Box::pin(reader))),
                    Err(error) => (Piece::Failed(failure(&target, &error)), State::Done),
                },
                State::Reading(mut reader) => match reader.fill_buf().await {
                    Ok([]) => (Piece::Data(lines.finish()), State::Done),
                    Ok(read) => {
                        let len = read.len().min(CHUNK_BYTES);
                        let piece = lines.push(&read[..len]);
                        reader.consume_unpin(len);
                        (Piece::Data(piece), State::Reading(reader))
                    }
                    // What was read of an unfinished line goes first.
                    Err(error) => (
                        Piece::Data(lines.finish()),
                        State::Failed(ReadFailure {
                            target: target.clone(),
                            not_found: false,
                            message: format!("the read of the log broke off: {error}"),
                        }),
                    ),
                },
            };
            if matches!(&piece, Piece::Data(data) if data.is_empty()) {
                state = next;
                continue;
            }
            return Some((piece, (next, lines, target)));
        }
    })
}

/// A read the API server refused or failed, as the user is told it.
fn failure(target: &Target, error: &kube::Error) -> ReadFailure {
    let (not_found, message) = match error {
        kube::Error::Api(status) => (status.code == 404, status.message.clone()),
        other => (false, other.to_string()),
    };
    ReadFailure {
        target: target.clone(),
        not_found,
        message,
    }
}

#[cfg(test)]
#[path = "read_tests.rs"]
pub(super) mod tests;
