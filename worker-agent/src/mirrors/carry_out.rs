//! Running an event through a mirror's record and carrying out what its
//! transition decided: applies sent, messages for the manager, log lines,
//! and the mirror looked at again.

use jobrelay_proto::v1::{
    AgentMessage, ApplyRejected, MirrorGone, RejectReason, agent_message::Kind,
};
use tracing::{debug, info, warn};

use super::mirror::{Command, Event, Note};
use super::{Mirrors, agent_message};
use crate::report::ApplyFailure;

impl Mirrors {
    /// Runs `event` on the record of `uid` (a new one if there is none) and
    /// carries out what its transition decided; messages for the manager go
    /// to `out`.
    pub(super) fn on(&mut self, uid: &str, event: Event, out: &mut Vec<AgentMessage>) {
        let retry = self.apply_retry;
        let commands = self.records.update(uid, |record| record.on(event, &retry));
        self.carry_out(uid, commands, out);
    }

    fn carry_out(&mut self, uid: &str, commands: Vec<Command>, out: &mut Vec<AgentMessage>) {
        for command in commands {
            match command {
                Command::Send(apply) => self.send_apply(apply),
                Command::SendDue => self.apply_due(),
                Command::LookAgain => {
                    self.due.insert(uid.to_string());
                }
                Command::Refused {
                    revision,
                    reason,
                    message,
                    retry_in,
                } => {
                    match retry_in {
                        None => {
                            warn!(%uid, reason = reason.as_str_name(), %message, "apply refused for good")
                        }
                        Some(delay) => {
                            warn!(%uid, reason = reason.as_str_name(), %message, retry_in = ?delay, "apply refused; retrying with backoff")
                        }
                    }
                    out.push(refusal(uid, revision, reason, message, retry_in));
                }
                Command::Gone(deletion) => {
                    info!(%uid, namespace = %deletion.namespace, name = %deletion.name, pods_deleted = deletion.pods_deleted, "mirror and every Pod gone");
                    self.confirmed_gone += 1;
                    out.push(agent_message(Kind::MirrorGone(MirrorGone {
                        origin_uid: uid.to_string(),
                        pods_deleted: deletion.pods_deleted,
                    })));
                }
                Command::Note(Note::Stale { revision }) => {
                    debug!(%uid, revision, "apply answered after a newer one arrived");
                }
                Command::Note(Note::Waits(failure)) => {
                    let result: Result<(), ApplyFailure> = Err(failure);
                    debug!(%uid, ?result, "apply waits");
                }
                Command::Note(Note::RefusedAgain {
                    reason,
                    message,
                    retry_in,
                }) => {
                    debug!(%uid, reason = reason.as_str_name(), %message, ?retry_in, "apply refused again");
                }
            }
        }
    }
}

fn refusal(
    uid: &str,
    revision: u64,
    reason: RejectReason,
    message: String,
    retry_in: Option<std::time::Duration>,
) -> AgentMessage {
    agent_message(Kind::ApplyRejected(ApplyRejected {
        origin_uid: uid.to_string(),
        revision,
        reason: reason as i32,
        message,
        retry_in: retry_in.and_then(|d| prost_types::Duration::try_from(d).ok()),
    }))
}
