//! What one peer may make the Relay hold before and after it is admitted:
//! the time it has to say Hello, and how large each kind of message may be.
//! gRPC allows one decoding limit per service — the largest kind's, Hello's
//! (an inventory of every mirror the worker holds) — so every other kind is
//! held to its own limit once decoded, and a session that sends more ends.

use std::time::Duration;

use jobrelay_proto::v1::{AgentMessage, Hello, agent_message};
use prost::Message;
use tonic::{Code, Status};

use super::admission::Dismissal;

/// How long a peer has for its Hello when its settings say nothing else.
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// HTTP/2 streams one connection may have open: an agent needs one; one
/// more lets a reconnect overlap the end of the last.
pub const MAX_CONCURRENT_STREAMS: u32 = 2;

/// The largest header block a request may carry.
pub const MAX_HEADER_LIST_SIZE: u32 = 16 * 1024;

/// Hellos read at once, across every peer: a peer's Hello is read only
/// with one of these, so at most this many Hellos' bytes are held at once
/// (8 × [`HELLO_LIMIT`]); a peer waits for its turn within its Hello
/// deadline, its data held back by HTTP/2 flow control meanwhile.
pub const HELLO_READS_AT_ONCE: usize = 8;

/// Hello: about 60 bytes per inventory entry, so room for ~70,000 mirrors.
/// Also the service's decoding limit: no message of any kind is read past it.
pub const HELLO_LIMIT: usize = 4 * 1024 * 1024;

/// The largest message of each kind an agent may send after its Hello.
pub fn limit(kind: &agent_message::Kind) -> usize {
    use agent_message::Kind as K;
    match kind {
        K::Hello(_) => HELLO_LIMIT,
        // A Job's status: conditions, counts, indexes (each bounded by the
        // API server), with room to spare.
        K::MirrorStatus(_) => 256 * 1024,
        // A refusal's message is an API server's error text.
        K::ApplyRejected(_) => 64 * 1024,
        K::MirrorLost(_) => 16 * 1024,
        // At most 64 Pods (one sweep's), each a name, a node and a duration.
        K::PodsHeld(_) => 64 * 1024,
        // An agent sends one Event at a time, its message cut to 512 bytes.
        K::WorkerEvents(_) => 16 * 1024,
        K::MirrorGone(_) | K::Heartbeat(_) | K::DeletionsHeld(_) => 1024,
        // Each node pool's labels, taints and amounts: a few hundred bytes,
        // and a cluster of a thousand different nodes fits.
        K::Room(_) => 1024 * 1024,
        // A chunk of a log stream (32 KiB) and the end's message.
        K::LogData(_) => 48 * 1024,
    }
}

/// A message larger than its kind may be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a {kind} message of {size} bytes (at most {limit} allowed)")]
pub struct TooLarge {
    pub kind: &'static str,
    pub size: usize,
    pub limit: usize,
}

/// Whether a message of `kind`, `size` bytes encoded, is within its limit.
pub fn check_size(kind: &agent_message::Kind, size: usize) -> Result<(), TooLarge> {
    let limit = limit(kind);
    if size <= limit {
        return Ok(());
    }
    Err(TooLarge {
        kind: kind_name(kind),
        size,
        limit,
    })
}

/// [`check_size`] of a received message; its size, encoded.
pub fn within_limit(kind: &agent_message::Kind) -> Result<usize, TooLarge> {
    let size = match kind {
        agent_message::Kind::MirrorStatus(m) => m.encoded_len(),
        agent_message::Kind::ApplyRejected(m) => m.encoded_len(),
        agent_message::Kind::MirrorLost(m) => m.encoded_len(),
        agent_message::Kind::MirrorGone(m) => m.encoded_len(),
        agent_message::Kind::Heartbeat(m) => m.encoded_len(),
        agent_message::Kind::Hello(m) => m.encoded_len(),
        agent_message::Kind::DeletionsHeld(m) => m.encoded_len(),
        agent_message::Kind::Room(m) => m.encoded_len(),
        agent_message::Kind::PodsHeld(m) => m.encoded_len(),
        agent_message::Kind::WorkerEvents(m) => m.encoded_len(),
        agent_message::Kind::LogData(m) => m.encoded_len(),
    };
    check_size(kind, size).map(|()| size)
}

fn kind_name(kind: &agent_message::Kind) -> &'static str {
    use agent_message::Kind as K;
    match kind {
        K::Hello(_) => "Hello",
        K::MirrorStatus(_) => "MirrorStatus",
        K::ApplyRejected(_) => "ApplyRejected",
        K::MirrorLost(_) => "MirrorLost",
        K::MirrorGone(_) => "MirrorGone",
        K::Heartbeat(_) => "Heartbeat",
        K::DeletionsHeld(_) => "DeletionsHeld",
        K::Room(_) => "Room",
        K::PodsHeld(_) => "PodsHeld",
        K::WorkerEvents(_) => "WorkerEvents",
        K::LogData(_) => "LogData",
    }
}

/// What came first on a session within the Hello deadline: `None` when
/// nothing did.
pub type First = Option<Result<Option<AgentMessage>, Status>>;

/// The Hello a session opens with, or why it is refused (a metric label and
/// the status the peer gets).
pub fn hello(first: First, timeout: Duration) -> Result<Hello, Dismissal> {
    match first {
        None => Err(Dismissal::new(
            "hello_timeout",
            Status::deadline_exceeded(format!("no Hello within {timeout:?}")),
        )),
        Some(Err(status)) if status.code() == Code::OutOfRange => Err(Dismissal::new(
            "message_too_large",
            Status::resource_exhausted(format!(
                "the Hello is larger than {HELLO_LIMIT} bytes: {}",
                status.message()
            )),
        )),
        Some(Err(status)) => Err(Dismissal::new("stream_error", status)),
        Some(Ok(Some(AgentMessage {
            kind: Some(agent_message::Kind::Hello(hello)),
        }))) => Ok(hello),
        Some(Ok(_)) => Err(Dismissal::new(
            "invalid_hello",
            Status::invalid_argument("the first message of a session must be Hello"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jobrelay_proto::v1::{Heartbeat, MirrorStatus};

    const TIMEOUT: Duration = Duration::from_secs(5);

    fn status_of(bytes: usize) -> agent_message::Kind {
        agent_message::Kind::MirrorStatus(MirrorStatus {
            status: vec![b' '; bytes],
            ..Default::default()
        })
    }

    #[test]
    fn a_message_within_its_kinds_limit_passes() {
        assert!(within_limit(&status_of(1000)).is_ok());
        let beat = agent_message::Kind::Heartbeat(Heartbeat::default());
        assert!(within_limit(&beat).is_ok());
    }

    #[test]
    fn a_message_beyond_its_kinds_limit_is_named_with_its_size() {
        let too_large = within_limit(&status_of(300 * 1024)).unwrap_err();
        assert_eq!(too_large.kind, "MirrorStatus");
        assert_eq!(too_large.limit, 256 * 1024);
        assert!(too_large.size > 300 * 1024);
        let beat = agent_message::Kind::Heartbeat(Heartbeat::default());
        assert_eq!(check_size(&beat, 1025).unwrap_err().limit, 1024);
    }

    #[test]
    fn no_hello_within_the_deadline_is_refused() {
        let Dismissal { reason, status } = hello(None, TIMEOUT).unwrap_err();
        assert_eq!(
            (reason, status.code()),
            ("hello_timeout", Code::DeadlineExceeded)
        );
    }

    #[test]
    fn a_hello_beyond_the_decoding_limit_is_refused() {
        let Dismissal { reason, status } =
            hello(Some(Err(Status::out_of_range("too large"))), TIMEOUT).unwrap_err();
        assert_eq!(
            (reason, status.code()),
            ("message_too_large", Code::ResourceExhausted)
        );
    }

    #[test]
    fn a_broken_stream_before_hello_is_refused() {
        let Dismissal { reason, status } =
            hello(Some(Err(Status::cancelled("gone"))), TIMEOUT).unwrap_err();
        assert_eq!((reason, status.code()), ("stream_error", Code::Cancelled));
    }

    #[test]
    fn a_session_that_ends_or_opens_with_anything_else_is_refused() {
        let heartbeat = AgentMessage {
            kind: Some(agent_message::Kind::Heartbeat(Heartbeat::default())),
        };
        for first in [
            Ok(None),
            Ok(Some(heartbeat)),
            Ok(Some(AgentMessage { kind: None })),
        ] {
            let Dismissal { reason, status } = hello(Some(first), TIMEOUT).unwrap_err();
            assert_eq!(
                (reason, status.code()),
                ("invalid_hello", Code::InvalidArgument)
            );
        }
    }

    #[test]
    fn a_hello_in_time_opens_the_session() {
        let first = AgentMessage {
            kind: Some(agent_message::Kind::Hello(Hello {
                cluster: "worker-a".into(),
                ..Default::default()
            })),
        };
        assert_eq!(
            hello(Some(Ok(Some(first))), TIMEOUT).unwrap().cluster,
            "worker-a"
        );
    }
}
