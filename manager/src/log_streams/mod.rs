//! The log streams open through the agents' sessions, for the logs API
//! ([`crate::visibility`]): each is a LogOpen
//! sent to a cluster's agent, whose LogData the session hands here
//! ([`LogStreams::deliver`]) and the caller's response body reads
//! ([`body`]). The body credits the agent with what it took, so no more
//! than [`WINDOW`] bytes of a stream are ever on their way; a stream ends
//! with its agent's last message, when its reader goes away (the agent is
//! told), or when its session ends.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::Stream;
use hyper::body::{Bytes, Frame};
use jobrelay_proto::v1::{LogClose, LogCredit, LogData, LogEndReason, manager_message::Kind};
use tokio::sync::mpsc;

pub mod limits;

use crate::fleet::{Outbox, message};
use limits::{Counts, Refused};

/// Bytes of a stream the agent may send before the manager credits them.
pub const WINDOW: u64 = 256 * 1024;
/// The most data one LogData holds (the agent's chunk).
pub const CHUNK: u64 = 32 * 1024;
/// Messages of a stream waiting for its reader: a window's worth of
/// chunks, its end, and one to spare. An agent that sends more broke the
/// window, and its stream is ended.
const QUEUED: usize = (WINDOW / CHUNK) as usize + 2;

/// Every stream open on this replica.
#[derive(Default)]
pub struct LogStreams {
    next: AtomicU64,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    open: HashMap<u64, Open>,
    counts: Counts,
}

struct Open {
    cluster: String,
    session: u64,
    user: String,
    to_reader: mpsc::Sender<LogData>,
}

/// One stream, as its reader holds it.
pub struct Opened {
    pub stream: u64,
    pub from_agent: mpsc::Receiver<LogData>,
}

impl LogStreams {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens a stream for `user` through `cluster`'s agent in `session`, if
    /// the limits allow ([`limits`]).
    pub fn open(&self, user: &str, cluster: &str, session: u64) -> Result<Opened, Refused> {
        let mut inner = self.lock();
        inner.counts.open(user, cluster)?;
        let stream = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (to_reader, from_agent) = mpsc::channel(QUEUED);
        let open = Open {
            cluster: cluster.into(),
            session,
            user: user.into(),
            to_reader,
        };
        inner.open.insert(stream, open);
        Ok(Opened { stream, from_agent })
    }

    /// Hands `data` from `cluster`'s agent to its stream's reader; data for
    /// a stream that is not open, or not the cluster's, is dropped. A
    /// stream whose reader has more queued than the window allows is ended.
    pub fn deliver(&self, cluster: &str, data: LogData) {
        let mut inner = self.lock();
        let stream = data.stream;
        let Some(open) = inner.open.get(&stream).filter(|o| o.cluster == cluster) else {
            return;
        };
        if open.to_reader.try_send(data).is_err() {
            tracing::warn!(cluster, stream, "a log stream sent past its window; ended");
            inner.forget(stream);
        }
    }

    /// Ends every stream of `cluster`'s `session`: it ended.
    pub fn session_ended(&self, cluster: &str, session: u64) {
        let mut inner = self.lock();
        let ended: Vec<u64> = inner
            .open
            .iter()
            .filter(|(_, open)| open.cluster == cluster && open.session == session)
            .map(|(stream, _)| *stream)
            .collect();
        for stream in ended {
            inner.forget(stream);
        }
    }

    /// Ends `stream` (its reader is done); idempotent.
    pub fn close(&self, stream: u64) {
        self.lock().forget(stream);
    }

    /// Streams open now.
    pub fn open_now(&self) -> usize {
        self.lock().counts.open_in_all()
    }
}

impl Inner {
    fn forget(&mut self, stream: u64) {
        if let Some(open) = self.open.remove(&stream) {
            self.counts.close(&open.user, &open.cluster);
        }
    }
}

/// What one message of a stream means to its reader.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Bytes to pass on, then credit.
    Data(Bytes),
    /// Nothing to pass on (an empty message: the agent opened the logs).
    Nothing,
    /// The logs ended: after `Data` if the message held some.
    Done(Option<Bytes>),
    /// The stream failed with this reason and message.
    Failed(LogEndReason, String),
}

/// Reads one message of a stream.
pub fn step(data: LogData) -> Step {
    let bytes = (!data.data.is_empty()).then(|| Bytes::from(data.data));
    match (data.end, bytes) {
        (None, Some(bytes)) => Step::Data(bytes),
        (None, None) => Step::Nothing,
        (Some(end), bytes) => match LogEndReason::try_from(end.reason) {
            Ok(LogEndReason::Done) => Step::Done(bytes),
            Ok(reason) => Step::Failed(reason, end.message),
            Err(_) => Step::Failed(LogEndReason::Unspecified, end.message),
        },
    }
}

/// Ends its stream when the reader drops it: the registry forgets it and
/// the agent is told to stop reading.
struct Reader {
    streams: std::sync::Arc<LogStreams>,
    outbox: Outbox,
    stream: u64,
    from_agent: mpsc::Receiver<LogData>,
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.streams.close(self.stream);
        let close = LogClose {
            stream: self.stream,
        };
        let _ = self.outbox.send(message(Kind::LogClose(close)));
    }
}

/// The error a body ends with when the logs could not be read to their end.
fn broken(text: String) -> std::io::Error {
    std::io::Error::other(text)
}

/// The response body of a stream: `first` (already read), then each
/// message as the agent sends it, crediting the agent as bytes are taken.
/// It ends cleanly with the logs' end, and with an error when the agent
/// says the read failed or its session ended.
pub fn body(
    streams: std::sync::Arc<LogStreams>,
    outbox: Outbox,
    opened: Opened,
    first: Option<LogData>,
    cluster: String,
) -> impl Stream<Item = Result<Frame<Bytes>, std::io::Error>> + Send + 'static {
    let reader = Reader {
        streams,
        outbox,
        stream: opened.stream,
        from_agent: opened.from_agent,
    };
    futures::stream::unfold(
        (Some(reader), first, cluster),
        |(reader, pending, cluster)| async move {
            let mut reader = reader?;
            let mut pending = pending;
            loop {
                let next = match pending.take() {
                    Some(data) => Some(data),
                    None => reader.from_agent.recv().await,
                };
                let Some(data) = next else {
                    let ended = broken(format!(
                        "the logs ended early: cluster {cluster}'s agent disconnected"
                    ));
                    return Some((Err(ended), (None, None, cluster)));
                };
                match step(data) {
                    Step::Nothing => continue,
                    Step::Data(bytes) => {
                        credit(&reader, bytes.len());
                        return Some((Ok(Frame::data(bytes)), (Some(reader), None, cluster)));
                    }
                    Step::Done(Some(bytes)) => {
                        return Some((Ok(Frame::data(bytes)), (None, None, cluster)));
                    }
                    Step::Done(None) => return None,
                    Step::Failed(_, text) => {
                        return Some((Err(broken(text)), (None, None, cluster)));
                    }
                }
            }
        },
    )
}

fn credit(reader: &Reader, bytes: usize) {
    let credit = LogCredit {
        stream: reader.stream,
        bytes: bytes as u64,
    };
    let _ = reader.outbox.send(message(Kind::LogCredit(credit)));
}

#[cfg(test)]
mod tests;
