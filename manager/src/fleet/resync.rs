//! Sending an open session's DesiredSet again (anti-entropy, see
//! `session/anti_entropy.rs`): the agent held another desired set than the
//! manager wants on its cluster. The set is what the stores want there, as
//! a session's first; a mirror the fleet still sends or holds there and
//! whose object the stores know is kept in it too, so a cache that lags
//! behind this replica's own placement never has a live mirror swept.

use std::collections::HashSet;

use jobrelay_proto::v1::{DesiredMirror, DesiredSet, manager_message::Kind};

use super::{Fleet, message};
use crate::kinds::Key;
use crate::mirror::State;
use crate::outbox::Delivery;

/// What a DesiredSet sent again did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resent {
    /// Every mirror tracked on the cluster, for a reconcile.
    pub keys: Vec<Key>,
    /// Mirrors the stores do not want there that the fleet still sends or
    /// holds there, kept in the set.
    pub kept: usize,
}

impl Fleet {
    /// Sends the DesiredSet of `cluster` again on `session`: `desired` (what
    /// the stores want there) and the mirrors [`kept_in_set`] keeps;
    /// released are the mirrors tracked there whose objects the stores
    /// still hold (`known`) but are not in the set, and anything else is for
    /// the agent's brake. `None` if `session` is no longer the cluster's, or
    /// its outbox did not take the message.
    pub fn resync(
        &self,
        cluster: &str,
        session: u64,
        desired: Vec<(DesiredMirror, Key)>,
        known: &HashSet<String>,
    ) -> Option<Resent> {
        let mut clusters = self.lock();
        let state = clusters.get_mut(cluster)?;
        let outbox = match &state.session {
            Some((id, outbox)) if *id == session => outbox.clone(),
            _ => return None,
        };
        for (mirror, key) in &desired {
            state.mirrors.change(&mirror.origin_uid, key, |_| ());
        }
        let mut mirrors: Vec<DesiredMirror> = desired.into_iter().map(|(m, _)| m).collect();
        let wanted: HashSet<String> = mirrors.iter().map(|m| m.origin_uid.clone()).collect();
        let mut kept = Vec::new();
        let mut released = Vec::new();
        for (uid, mirror) in state.mirrors.iter() {
            if wanted.contains(uid) || !known.contains(uid) {
                continue;
            }
            if kept_in_set(&mirror.state) {
                kept.push((uid.to_string(), mirror.key.namespace.clone()));
            } else {
                released.push(uid.to_string());
            }
        }
        kept.sort_unstable();
        released.sort_unstable();
        let resent = Resent {
            keys: state.mirrors.values().map(|m| m.key.clone()).collect(),
            kept: kept.len(),
        };
        mirrors.extend(
            kept.into_iter()
                .map(|(origin_uid, namespace)| DesiredMirror {
                    origin_uid,
                    namespace,
                }),
        );
        let sent = outbox.send(message(Kind::DesiredSet(DesiredSet {
            mirrors,
            released,
            after_lost: false,
        })));
        (sent == Delivery::Queued).then_some(resent)
    }
}

/// Whether a mirror the stores do not want on its cluster stays in a
/// DesiredSet sent again: the fleet sent it (or the worker holds it) and
/// has not withdrawn it, which a Job cache lagging behind the placement
/// would otherwise undo. One being deleted, lost, gone or never sent is not.
pub fn kept_in_set(state: &State) -> bool {
    matches!(
        state,
        State::Sending { .. } | State::Held(_) | State::Refused { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::{Held, Rejection, Sent};
    use jobrelay_proto::v1::{MirrorPhase, RejectReason};
    use std::time::Instant;

    #[test]
    fn only_a_mirror_sent_or_held_and_not_withdrawn_is_kept() {
        let held = Held {
            revision: 1,
            phase: MirrorPhase::Running,
            status: None,
            unschedulable: None,
            pods: None,
        };
        let sent = Sent {
            session: 1,
            revision: 1,
            since: None,
        };
        let rejection = Rejection {
            revision: 1,
            reason: RejectReason::QuotaExceeded,
            message: String::new(),
            retry_in: None,
            since: std::time::Instant::now(),
        };
        let cases = [
            ("unsent", State::Unsent, false),
            ("sending", State::Sending { sent, held: None }, true),
            ("held", State::Held(held.clone()), true),
            (
                "refused",
                State::Refused {
                    rejection,
                    sent: Some(sent),
                    held: None,
                },
                true,
            ),
            (
                "deleting",
                State::Deleting {
                    session: 1,
                    since: Instant::now(),
                    held: Some(held),
                    loss: None,
                    pods_held: Vec::new(),
                },
                false,
            ),
            (
                "gone",
                State::Gone {
                    pods_deleted: 0,
                    loss: None,
                },
                false,
            ),
        ];
        for (what, state, kept) in cases {
            assert_eq!(kept_in_set(&state), kept, "{what}");
        }
    }
}
