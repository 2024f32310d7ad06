//! The messages queued for one connected agent, bounded: an agent that
//! reads slower than the manager has things to tell it is not buffered
//! without end. The first message that finds the queue full marks the
//! session as fallen behind; the session then ends, and the agent's next
//! Hello resyncs it (its inventory and a fresh DesiredSet replay state, so
//! nothing dropped here is lost).

use std::sync::Arc;

use jobrelay_proto::v1::ManagerMessage;
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
}

impl Outbox {
    /// An outbox holding at most `capacity` messages (at least one), and
    /// the receiving end the session's response stream reads.
    pub fn new(capacity: usize) -> (Outbox, mpsc::Receiver<ManagerMessage>) {
        let (queue, queued) = mpsc::channel(capacity.max(1));
        let outbox = Outbox {
            queue,
            fell_behind: Arc::default(),
        };
        (outbox, queued)
    }

    /// Queues `message` without waiting (callers hold the fleet's lock).
    pub fn send(&self, message: ManagerMessage) -> Delivery {
        let outcome = delivery(self.queue.try_send(message));
        if outcome == Delivery::FellBehind {
            self.fell_behind.notify_one();
        }
        outcome
    }

    /// Resolves once a message found the queue full.
    pub async fn fell_behind(&self) {
        self.fell_behind.notified().await;
    }
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
    use jobrelay_proto::v1::{Heartbeat, manager_message::Kind};

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
}
