//! Sending the room on a session: once the session's DesiredSet was taken,
//! then whenever the room changed, no more often than the interval
//! (`--room-interval`) — or a tenth of it where the room grew, for Jobs
//! may be waiting on the manager for that room. Whether to send now is
//! [`due`], a plain function; [`Reports`] waits on the room, the DesiredSet
//! and the clock to ask it. Each report names the mirrors it counts more
//! Pods of than the last on the session did ([`newly_counted`]), so the
//! manager stops holding room for them as soon as the room shows their
//! Pods.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jobrelay_kinds::room::Room;
use jobrelay_proto::v1::{AgentMessage, Holding, agent_message};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::watch;
use tokio::time::Instant;

use super::Summed;

/// Whether the session sends the room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    Now,
    /// It changed, but the last was sent less than the interval ago.
    At(Instant),
    /// Nothing to send: the room is not known, the session's DesiredSet
    /// has not come, or the manager has the room as it is.
    Not,
}

/// The room last sent on this session, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    pub room: Room,
    pub at: Instant,
}

/// How much sooner than the interval a room that grew is sent.
const GREW_SOONER: u32 = 10;

/// Whether to send `room` now, given what this session sent last, whether
/// `room` counts more Pods of some mirror than that did, whether its
/// DesiredSet was taken, and the least time between two sends (a
/// [`GREW_SOONER`]th of it where the room has more of something, or counts
/// a mirror's Pods the manager still holds room for).
pub fn due(
    room: Option<&Room>,
    sent: Option<&Sent>,
    counts_more: bool,
    desired_taken: bool,
    interval: Duration,
    now: Instant,
) -> Due {
    let Some(room) = room else {
        return Due::Not;
    };
    if !desired_taken {
        return Due::Not;
    }
    match sent {
        None => Due::Now,
        Some(sent) if sent.room == *room => Due::Not,
        Some(sent) => {
            let wait = match counts_more || room.more_than(&sent.room) {
                true => interval / GREW_SOONER,
                false => interval,
            };
            let next = sent.at + wait;
            if now >= next { Due::Now } else { Due::At(next) }
        }
    }
}

/// Mirrors one report names at most: some 350 KiB, well within the
/// manager's limit for a Room. A mirror left out is one the manager holds
/// room for a little longer (until its second report after the Pods
/// started), as for an agent that names none.
pub const NAMED_AT_MOST: usize = 8192;

/// The mirrors `now` counts more Pods of than `sent` did, with how many
/// it counts: each origin UID whose Pods a report shows for the first time
/// or more of, [`NAMED_AT_MOST`] of them at most.
pub fn newly_counted(
    now: &HashMap<String, u32>,
    sent: &HashMap<String, u32>,
) -> HashMap<String, u32> {
    now.iter()
        .filter(|(uid, pods)| more_than_sent(uid, **pods, sent))
        .take(NAMED_AT_MOST)
        .map(|(uid, pods)| (uid.clone(), *pods))
        .collect()
}

/// Whether `now` counts more Pods of some mirror than `sent` did.
fn counts_more(now: &HashMap<String, u32>, sent: &HashMap<String, u32>) -> bool {
    now.iter()
        .any(|(uid, pods)| more_than_sent(uid, *pods, sent))
}

fn more_than_sent(uid: &str, pods: u32, sent: &HashMap<String, u32>) -> bool {
    sent.get(uid).is_none_or(|was| *was < pods)
}

/// What every session's room reports are made from: the room as the
/// watches publish it (`None` while unknown or not readable), the least
/// time between two sends, and the count of those sent.
#[derive(Clone)]
pub struct Feed {
    pub room: watch::Receiver<Option<Summed>>,
    pub interval: Duration,
    pub sent: Counter,
}

impl Feed {
    /// The reports of one session, which took its DesiredSet once
    /// `holding` is set.
    pub fn for_session(&self, holding: watch::Receiver<Option<Holding>>) -> Reports {
        Reports {
            feed: self.clone(),
            holding,
            sent: None,
            counted: Arc::default(),
        }
    }
}

/// The room reports of one session.
pub struct Reports {
    feed: Feed,
    holding: watch::Receiver<Option<Holding>>,
    sent: Option<Sent>,
    /// The Pods of each mirror the last report sent counted.
    counted: Arc<HashMap<String, u32>>,
}

impl Reports {
    /// The next Room message, once [`due`]. Cancel-safe: what it sent is
    /// noted only as it returns.
    pub async fn next(&mut self) -> AgentMessage {
        loop {
            let now = Instant::now();
            let (decision, summed) = {
                let summed = self.feed.room.borrow_and_update();
                let taken = self.holding.borrow_and_update().is_some();
                let counts_more = summed
                    .as_ref()
                    .is_some_and(|summed| counts_more(&summed.counted, &self.counted));
                let decision = due(
                    summed.as_ref().map(|summed| &summed.room),
                    self.sent.as_ref(),
                    counts_more,
                    taken,
                    self.feed.interval,
                    now,
                );
                let summed = (decision == Due::Now).then(|| summed.clone()).flatten();
                (decision, summed)
            };
            if let Some(summed) = summed {
                return self.sending(summed, now);
            }
            let clock = async {
                match decision {
                    Due::At(at) => tokio::time::sleep_until(at).await,
                    Due::Now | Due::Not => std::future::pending().await,
                }
            };
            tokio::select! {
                () = clock => {}
                () = changed(&mut self.feed.room) => {}
                () = changed(&mut self.holding) => {}
            }
        }
    }

    fn sending(&mut self, summed: Summed, now: Instant) -> AgentMessage {
        let mut message: jobrelay_proto::v1::Room = (&summed.room).into();
        message.counted = newly_counted(&summed.counted, &self.counted);
        self.counted = summed.counted;
        self.sent = Some(Sent {
            room: summed.room,
            at: now,
        });
        self.feed.sent.inc();
        AgentMessage {
            kind: Some(agent_message::Kind::Room(message)),
        }
    }
}

/// The next Room message of a session's `reports`; never, where it reports
/// no room.
pub async fn next(reports: Option<&mut Reports>) -> AgentMessage {
    match reports {
        Some(reports) => reports.next().await,
        None => std::future::pending().await,
    }
}

/// Resolves when `value` changes; never, once its sender is gone.
async fn changed<T>(value: &mut watch::Receiver<T>) {
    if value.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
#[path = "reports_tests.rs"]
mod tests;
