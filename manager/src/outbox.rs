//! The messages queued for one connected agent, bounded: an agent that
//! reads slower than the manager has things to tell it is not buffered
//! without end. The first message that finds the queue full marks the
//! session as fallen behind; the session then ends, and the agent's next
//! Hello resyncs it (its inventory and a fresh DesiredSet replay state, so
//! nothing dropped here is lost).
//!
//! It also counts the messages queued that change the agent's desired set
//! (DesiredSet, ApplyMirror, DeleteMirror): sends happen under the fleet's
//! lock, so the count is in the order the agent takes them, and an agent
//! whose Heartbeat says it took as many has nothing in flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use jobrelay_proto::v1::ManagerMessage;
use jobrelay_proto::v1::manager_message::Kind;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Notify, mpsc};

/// Messages one agent may have queued when its settings say nothing else.
pub const DEFAULT_CAPACITY: usize = 4096;

/// What became of a message handed to an [`Outbox`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Queued,
    /// The queue was full: the message is dropped and the session must end.
    FellBehind,
    /// The session has ended already.
    Closed,
}

/// What a send's result means for the session.
pub fn delivery<T>(result: Result<(), TrySendError<T>>) -> Delivery {
    match result {
        Ok(()) => Delivery::Queued,
        Err(TrySendError::Full(_)) => Delivery::FellBehind,
        Err(TrySendError::Closed(_)) => Delivery::Closed,
    }
}

/// The sending end; cheap to clone, one per session.
#[derive(Clone, Debug)]
pub struct Outbox {
    queue: mpsc::Sender<ManagerMessage>,
    fell_behind: Arc<Notify>,
    /// Set-changing messages queued in this session.
    set_changes: Arc<AtomicU64>,
}

impl Outbox {
    /// An outbox holding at most `capacity` messages (at least one), and
    /// the receiving end the session's response stream reads.
    pub fn new(capacity: usize) -> (Outbox, mpsc::Receiver<ManagerMessage>) {
        let (queue, queued) = mpsc::channel(capacity.max(1));
        let outbox = Outbox {
            queue,
            fell_behind: Arc::default(),
            set_changes: Arc::default(),
        };
        (outbox, queued)
    }

    /// Queues `message` without waiting (callers hold the fleet's lock).
    pub fn send(&self, message: ManagerMessage) -> Delivery {
        let changes_set = changes_the_desired_set(&message);
        let outcome = delivery(self.queue.try_send(message));
        match outcome {
            Delivery::Queued if changes_set => {
                self.set_changes.fetch_add(1, Ordering::Relaxed);
            }
            Delivery::FellBehind => self.fell_behind.notify_one(),
            _ => {}
        }
        outcome
    }

    /// The DesiredSets, ApplyMirrors and DeleteMirrors queued in this
    /// session: an agent that took as many has nothing of them in flight.
    pub fn set_changes_sent(&self) -> u64 {
        self.set_changes.load(Ordering::Relaxed)
    }

    /// Resolves once a message found the queue full.
    pub async fn fell_behind(&self) {
        self.fell_behind.notified().await;
    }
}

/// Whether the agent's desired set changes with `message`.
fn changes_the_desired_set(message: &ManagerMessage) -> bool {
    matches!(
        message.kind,
        Some(Kind::DesiredSet(_) | Kind::ApplyMirror(_) | Kind::DeleteMirror(_))
    )
}

impl jobrelay_process::heartbeat::Outbound<ManagerMessage> for Outbox {
    fn queue(&self, message: ManagerMessage) -> bool {
        self.send(message) == Delivery::Queued
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::message;
    use jobrelay_proto::v1::{ApplyMirror, DeleteMirror, DesiredSet, Heartbeat, Welcome};

    fn beat() -> ManagerMessage {
        message(Kind::Heartbeat(Heartbeat::default()))
    }

    #[test]
    fn a_send_is_queued_while_there_is_room() {
        assert_eq!(delivery::<()>(Ok(())), Delivery::Queued);
    }

    #[test]
    fn a_full_queue_means_the_reader_fell_behind() {
        assert_eq!(delivery(Err(TrySendError::Full(()))), Delivery::FellBehind);
    }

    #[test]
    fn a_closed_queue_means_the_session_ended() {
        assert_eq!(delivery(Err(TrySendError::Closed(()))), Delivery::Closed);
    }

    #[tokio::test]
    async fn the_message_that_finds_the_queue_full_marks_the_session() {
        let (outbox, mut queued) = Outbox::new(2);
        assert_eq!(outbox.send(beat()), Delivery::Queued);
        assert_eq!(outbox.send(beat()), Delivery::Queued);
        assert_eq!(outbox.send(beat()), Delivery::FellBehind);
        tokio::time::timeout(std::time::Duration::from_secs(5), outbox.fell_behind())
            .await
            .expect("the session is told");
        assert!(queued.recv().await.is_some());
        drop(queued);
        assert_eq!(outbox.send(beat()), Delivery::Closed);
    }

    #[test]
    fn the_messages_that_change_the_desired_set_are_counted_once_queued() {
        let (outbox, _queued) = Outbox::new(8);
        let sends = [
            (message(Kind::Welcome(Welcome::default())), 0),
            (message(Kind::DesiredSet(DesiredSet::default())), 1),
            (beat(), 1),
            (message(Kind::ApplyMirror(ApplyMirror::default())), 2),
            (message(Kind::DeleteMirror(DeleteMirror::default())), 3),
        ];
        for (sent, counted) in sends {
            let what = format!("{:?}", sent.kind);
            assert_eq!(outbox.send(sent), Delivery::Queued);
            assert_eq!(outbox.set_changes_sent(), counted, "after {what}");
        }
    }

    #[test]
    fn a_message_not_queued_is_not_counted() {
        let (outbox, queued) = Outbox::new(1);
        let apply = || message(Kind::ApplyMirror(ApplyMirror::default()));
        assert_eq!(outbox.send(apply()), Delivery::Queued);
        assert_eq!(outbox.send(apply()), Delivery::FellBehind);
        assert_eq!(
            outbox.set_changes_sent(),
            1,
            "the one that found the queue full"
        );
        drop(queued);
        assert_eq!(outbox.send(apply()), Delivery::Closed);
        assert_eq!(outbox.set_changes_sent(), 1, "the one sent after the end");
        assert_eq!(
            outbox.clone().set_changes_sent(),
            1,
            "clones share the count"
        );
    }
}
