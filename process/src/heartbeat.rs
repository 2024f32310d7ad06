//! Heartbeats, the same on both ends of a session: a message every interval
//! (which the peer may change, as the manager's Welcome does), until the
//! session's outbound stream closes. Any message proves a peer alive, so a
//! heartbeat is only what is sent when there is nothing else to say.

use std::time::Duration;

use tokio::sync::{mpsc, watch};

/// Where a session's heartbeats are queued.
pub trait Outbound<M> {
    /// Queues `message`; false once the session can take no more (its
    /// stream closed, or its queue cut it off).
    fn queue(&self, message: M) -> bool;
}

impl<M> Outbound<M> for mpsc::UnboundedSender<M> {
    fn queue(&self, message: M) -> bool {
        self.send(message).is_ok()
    }
}

/// Sends `beat()` on `outbox` every `interval`, following changes of the
/// interval; returns once the outbox takes no more.
pub async fn send_every<M>(
    outbox: impl Outbound<M>,
    mut interval: watch::Receiver<Duration>,
    beat: impl Fn() -> M,
) {
    loop {
        let every = *interval.borrow_and_update();
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            changed = interval.changed() => {
                if changed.is_err() {
                    // Nobody changes it any more: keep the last interval.
                    return keep_every(outbox, every, beat).await;
                }
                continue;
            }
        }
        if !outbox.queue(beat()) {
            return;
        }
    }
}

async fn keep_every<M>(outbox: impl Outbound<M>, every: Duration, beat: impl Fn() -> M) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        ticks.tick().await;
        if !outbox.queue(beat()) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn beats_follow_the_interval_and_stop_with_the_session() {
        let (outbox, mut sent) = mpsc::unbounded_channel();
        let (interval, every) = watch::channel(Duration::from_secs(5));
        let beats = tokio::spawn(send_every(outbox, every, || "beat"));
        let start = tokio::time::Instant::now();
        assert_eq!(sent.recv().await, Some("beat"));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        interval.send_replace(Duration::from_secs(1));
        assert_eq!(sent.recv().await, Some("beat"));
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(6),
            "the new interval applies at once"
        );
        drop(interval);
        assert_eq!(sent.recv().await, Some("beat"));
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(7),
            "and is kept when nobody changes it"
        );
        drop(sent);
        beats.await.unwrap();
    }
}
