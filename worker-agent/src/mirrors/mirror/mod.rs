//! One mirror as the agent keeps it, by origin UID: what is under way for
//! it ([`Work`]), the status last reported, the mirror Job last seen and the
//! Pods its live mirror does not own. Its work changes only through
//! [`transition`], a pure function that returns what to do as data
//! ([`Command`]); the passes carry that out.

mod records;
mod transition;

pub(super) use records::Records;
pub(super) use transition::{ApplyRetry, Command, Event, Note, transition};

use std::collections::HashMap;
use std::time::Instant;

use backon::ExponentialBackoff;
use jobrelay_proto::kinds::KindName;
use jobrelay_proto::v1::{ApplyMirror, RejectReason};

use super::status::LastReport;
use crate::teardown::Progress;

/// Everything the agent holds of one mirror. A record that holds nothing is
/// forgotten ([`Record::holds_nothing`]).
#[derive(Debug, Default)]
pub(super) struct Record {
    pub work: Work,
    /// The last status sent to the manager in this session.
    pub last_report: Option<LastReport>,
    /// UID of the live mirror Job last seen, so one that disappears is known
    /// to be lost.
    pub seen_mirror: Option<String>,
    /// Pods not owned by the live mirror, by Pod UID: since when.
    pub strays: HashMap<String, Instant>,
    /// Stopped by the fence, and not applied since: the next Hello says
    /// revision 0, so the manager applies it again if it wants it to run.
    pub fenced: bool,
}

impl Record {
    /// Runs `event` through [`transition`]; a mirror confirmed gone also
    /// forgets its last report and the Job last seen, and one applied is no
    /// longer fenced.
    pub fn on(&mut self, event: Event, retry: &ApplyRetry) -> Vec<Command> {
        if matches!(event, Event::Answered { result: Ok(()), .. }) {
            self.fenced = false;
        }
        let (work, commands) = transition(std::mem::take(&mut self.work), event, retry);
        self.work = work;
        if commands.iter().any(|c| matches!(c, Command::Gone(_))) {
            self.last_report = None;
            self.seen_mirror = None;
            self.fenced = false;
        }
        commands
    }

    /// Nothing is under way, reported, seen or waited on: the record can go.
    pub fn holds_nothing(&self) -> bool {
        self.work == Work::Idle
            && self.last_report.is_none()
            && self.seen_mirror.is_none()
            && self.strays.is_empty()
            && !self.fenced
    }
}

/// What is under way for a mirror. Each state holds only what is true in
/// it: an apply and a deletion are never sent at once, and what arrives
/// meanwhile waits inside the state it waits on.
#[derive(Debug, Default, PartialEq)]
pub(super) enum Work {
    /// Nothing to send.
    #[default]
    Idle,
    /// An apply not taken yet: new, an older mirror of that name still going,
    /// or refused by the worker for a reason that can clear.
    Waiting(PendingApply),
    /// An apply is out, not answered yet: no second one is sent, and a
    /// deletion waits for the answer (a create landing after "gone" was
    /// confirmed would leave the mirror behind).
    Applying { next: Next },
    /// Being deleted; an apply that arrived since waits until it is gone.
    Deleting {
        deletion: Deletion,
        then_apply: Option<PendingApply>,
    },
}

/// What waits for the answer to an apply that is out.
#[derive(Debug, PartialEq)]
pub(super) enum Next {
    /// The apply the answer settles: the one sent, or one that replaced it
    /// (then the answer is stale).
    Apply(PendingApply),
    /// A deletion that arrived meanwhile, and an apply that arrived after it.
    Delete {
        deletion: Deletion,
        then_apply: Option<PendingApply>,
    },
}

impl Work {
    /// Being deleted, whether or not its deletion waits for an apply's answer.
    pub fn is_deleting(&self) -> bool {
        matches!(
            self,
            Work::Deleting { .. }
                | Work::Applying {
                    next: Next::Delete { .. }
                }
        )
    }

    /// The deletion under way, whether or not it waits for an apply's answer.
    pub fn deletion(&self) -> Option<&Deletion> {
        match self {
            Work::Deleting { deletion, .. }
            | Work::Applying {
                next: Next::Delete { deletion, .. },
            } => Some(deletion),
            _ => None,
        }
    }

    /// [`Work::deletion`], to change it.
    pub fn deletion_mut(&mut self) -> Option<&mut Deletion> {
        match self {
            Work::Deleting { deletion, .. }
            | Work::Applying {
                next: Next::Delete { deletion, .. },
            } => Some(deletion),
            _ => None,
        }
    }

    /// The deletion to move forward now: none while an apply is out.
    pub fn deletion_to_drive(&mut self) -> Option<&mut Deletion> {
        match self {
            Work::Deleting { deletion, .. } => Some(deletion),
            _ => None,
        }
    }

    /// An apply waits whose time has come.
    pub fn apply_due(&self, now: Instant) -> bool {
        matches!(self, Work::Waiting(pending) if pending.is_due(now))
    }
}

/// A mirror being deleted.
#[derive(Debug, PartialEq)]
pub(in crate::mirrors) struct Deletion {
    pub namespace: String,
    pub name: String,
    /// What the deletion machine (`teardown::step`) remembers.
    pub progress: Progress,
    pub pods_deleted: u32,
    /// The mirror's kind, where the manager named it; `None` for what the
    /// agent found to delete itself (an orphan, what is left of a loss).
    pub kind: Option<KindName>,
    /// Set when the mirror was lost behind jobrelay's back, not deleted at
    /// the manager's request.
    pub lost: Option<Lost>,
}

/// What the agent tells the manager of a lost mirror.
#[derive(Debug, PartialEq)]
pub(in crate::mirrors) struct Lost {
    pub mirror_uid: Option<String>,
    pub observed: String,
    /// Sent to the manager in the current session.
    pub reported: bool,
}

impl Deletion {
    /// A deletion not started yet.
    pub fn new(
        namespace: String,
        name: String,
        kind: Option<KindName>,
        lost: Option<Lost>,
    ) -> Self {
        Deletion {
            namespace,
            name,
            progress: Progress::default(),
            pods_deleted: 0,
            kind,
            lost,
        }
    }
}

/// An apply not yet taken by the worker.
#[derive(Debug, PartialEq)]
pub(super) struct PendingApply {
    pub apply: ApplyMirror,
    /// Not before then; `None`: at the next pass.
    pub not_before: Option<Instant>,
    /// Set once the worker refused it for a reason that can clear.
    pub retry: Option<Retry>,
}

impl PendingApply {
    /// The manager's apply, to be sent at the next pass.
    pub fn new(apply: ApplyMirror) -> Self {
        PendingApply {
            apply,
            not_before: None,
            retry: None,
        }
    }

    fn is_due(&self, now: Instant) -> bool {
        self.not_before.is_none_or(|at| at <= now)
    }
}

/// The backoff of an apply refused for a reason that can clear.
#[derive(Debug)]
pub(super) struct Retry {
    pub delays: ExponentialBackoff,
    /// The reason last reported to the manager.
    pub reason: RejectReason,
}

/// Two retries are alike by the reason reported; the delays to come are
/// drawn with jitter.
impl PartialEq for Retry {
    fn eq(&self, other: &Self) -> bool {
        self.reason == other.reason
    }
}

#[cfg(test)]
#[path = "transition_tests.rs"]
mod transition_tests;
