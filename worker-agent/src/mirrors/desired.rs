//! What the manager wants on this worker, as the agent holds it in one
//! session: the origin UIDs of the session's last DesiredSet, plus those
//! applied since, minus those deleted since — and how many such
//! set-changing messages it took. Each change is published as the
//! Heartbeat's [`Holding`], so the manager can compare it with what it
//! wants and resend the DesiredSet when the two drifted apart.

use jobrelay_proto::holding::OriginUids;
use jobrelay_proto::v1::Holding;
use tokio::sync::watch;

/// The desired set of a session and the count of messages that changed it.
#[derive(Debug)]
pub(super) struct Desired {
    /// `None` until the session's first DesiredSet: nothing is swept before.
    uids: Option<OriginUids>,
    /// Set-changing manager messages taken in this session.
    received: u64,
    published: watch::Sender<Option<Holding>>,
}

impl Default for Desired {
    fn default() -> Self {
        Desired {
            uids: None,
            received: 0,
            published: watch::Sender::new(None),
        }
    }
}

impl Desired {
    /// The set, once the session's first DesiredSet came.
    pub fn uids(&self) -> Option<&OriginUids> {
        self.uids.as_ref()
    }

    /// A new session: nothing is held, nothing was taken.
    pub fn new_session(&mut self) {
        self.uids = None;
        self.received = 0;
        self.publish();
    }

    /// A DesiredSet: the manager's complete list.
    pub fn replace(&mut self, uids: impl IntoIterator<Item = String>) {
        self.uids = Some(uids.into_iter().collect());
        self.received += 1;
        self.publish();
    }

    /// An ApplyMirror of `uid`.
    pub fn applied(&mut self, uid: &str) {
        if let Some(uids) = &mut self.uids {
            uids.insert(uid.to_string());
        }
        self.received += 1;
        self.publish();
    }

    /// A DeleteMirror of `uid`.
    pub fn deleted(&mut self, uid: &str) {
        if let Some(uids) = &mut self.uids {
            uids.remove(uid);
        }
        self.received += 1;
        self.publish();
    }

    /// What the next Heartbeat says: absent before the session's DesiredSet.
    pub fn holding(&self) -> Option<Holding> {
        let uids = self.uids.as_ref()?;
        Some(uids.summary().holding(self.received))
    }

    /// Follows [`Desired::holding`] as it changes.
    pub fn watch(&self) -> watch::Receiver<Option<Holding>> {
        self.published.subscribe()
    }

    fn publish(&self) {
        self.published.send_replace(self.holding());
    }
}

#[cfg(test)]
mod tests {
    use jobrelay_proto::holding::Summary;

    use super::*;

    fn held(received: u64, uids: &[&str]) -> Option<Holding> {
        Some(Summary::of(uids.iter().copied()).holding(received))
    }

    #[test]
    fn nothing_is_held_before_the_sessions_desired_set() {
        let mut desired = Desired::default();
        let watched = desired.watch();
        desired.applied("a");
        desired.deleted("b");
        assert_eq!(desired.holding(), None);
        assert_eq!(*watched.borrow(), None);
    }

    #[test]
    fn a_desired_set_then_applies_and_deletes_each_change_the_holding_and_count() {
        let mut desired = Desired::default();
        let watched = desired.watch();
        desired.replace(["a".to_string(), "b".to_string()]);
        assert_eq!(desired.holding(), held(1, &["a", "b"]));
        desired.applied("c");
        assert_eq!(desired.holding(), held(2, &["a", "b", "c"]));
        desired.applied("c");
        assert_eq!(
            desired.holding(),
            held(3, &["a", "b", "c"]),
            "a second apply of one UID"
        );
        desired.deleted("a");
        assert_eq!(desired.holding(), held(4, &["b", "c"]));
        desired.deleted("x");
        assert_eq!(
            desired.holding(),
            held(5, &["b", "c"]),
            "a delete of what is not held"
        );
        assert_eq!(
            *watched.borrow(),
            held(5, &["b", "c"]),
            "published as it changes"
        );
    }

    #[test]
    fn a_second_desired_set_replaces_the_set_and_counts_on() {
        let mut desired = Desired::default();
        desired.replace(["a".to_string()]);
        desired.applied("b");
        desired.replace(["c".to_string()]);
        assert_eq!(desired.holding(), held(3, &["c"]));
    }

    #[test]
    fn a_new_session_starts_from_nothing() {
        let mut desired = Desired::default();
        let watched = desired.watch();
        desired.replace(["a".to_string()]);
        desired.new_session();
        assert_eq!(desired.holding(), None);
        assert_eq!(*watched.borrow(), None);
        desired.replace(["a".to_string()]);
        assert_eq!(desired.holding(), held(1, &["a"]));
    }
}
