//! What the manager wants on this worker, as the agent holds it in one
//! session: the origin UIDs of the session's last DesiredSet, plus those
//! applied since, minus those deleted since — and how many such
//! set-changing messages it took. Each change is published as the
//! Heartbeat's [`Holding`], so the manager can compare it with what it
//! wants and resend the DesiredSet when the two drifted apart.
//!
//! Beside it, each mirror's home: the namespace the manager named for it
//! (its Job's), where alone the agent counts objects as the mirror's.

use std::collections::HashMap;

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
    /// The namespace of each mirror the manager named one for: those of
    /// the last DesiredSet, and those applied or deleted since. An origin
    /// UID never changes namespace, so a new session keeps them.
    homes: HashMap<String, String>,
    published: watch::Sender<Option<Holding>>,
}

impl Default for Desired {
    fn default() -> Self {
        Desired {
            uids: None,
            received: 0,
            homes: HashMap::new(),
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

    /// A DesiredSet: the manager's complete list, each origin UID with its
    /// namespace (empty: not named). The homes become the set's.
    pub fn replace(&mut self, mirrors: impl IntoIterator<Item = (String, String)>) {
        self.homes.clear();
        let mut uids = OriginUids::default();
        for (uid, namespace) in mirrors {
            if !namespace.is_empty() {
                self.homes.insert(uid.clone(), namespace);
            }
            uids.insert(uid);
        }
        self.uids = Some(uids);
        self.received += 1;
        self.publish();
    }

    /// An ApplyMirror of `uid` into `namespace`.
    pub fn applied(&mut self, uid: &str, namespace: Option<&str>) {
        if let Some(uids) = &mut self.uids {
            uids.insert(uid.to_string());
        }
        self.home(uid, namespace);
        self.received += 1;
        self.publish();
    }

    /// A DeleteMirror of `uid` in `namespace`: no longer wanted, and its
    /// home kept until the next DesiredSet while it is deleted.
    pub fn deleted(&mut self, uid: &str, namespace: Option<&str>) {
        if let Some(uids) = &mut self.uids {
            uids.remove(uid);
        }
        self.home(uid, namespace);
        self.received += 1;
        self.publish();
    }

    /// The namespace the manager named for the mirror of `uid`, if it did.
    pub fn home_of(&self, uid: &str) -> Option<&str> {
        self.homes.get(uid).map(String::as_str)
    }

    fn home(&mut self, uid: &str, namespace: Option<&str>) {
        if let Some(namespace) = namespace.filter(|n| !n.is_empty()) {
            self.homes.insert(uid.to_string(), namespace.to_string());
        }
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

    fn mirrors(uids: &[&str]) -> Vec<(String, String)> {
        uids.iter()
            .map(|u| (u.to_string(), String::new()))
            .collect()
    }

    #[test]
    fn each_mirrors_home_is_the_namespace_the_manager_named_last() {
        let mut desired = Desired::default();
        desired.replace([
            ("a".to_string(), "team-a".to_string()),
            ("b".to_string(), String::new()),
        ]);
        assert_eq!(desired.home_of("a"), Some("team-a"));
        assert_eq!(desired.home_of("b"), None, "not named: none");
        desired.applied("c", Some("team-c"));
        desired.deleted("d", Some("team-d"));
        assert_eq!(desired.home_of("c"), Some("team-c"));
        assert_eq!(
            desired.home_of("d"),
            Some("team-d"),
            "kept while it is deleted"
        );
        desired.new_session();
        assert_eq!(
            desired.home_of("a"),
            Some("team-a"),
            "an origin UID never moves"
        );
        desired.replace([("c".to_string(), "team-c".to_string())]);
        assert_eq!(
            (desired.home_of("a"), desired.home_of("d")),
            (None, None),
            "the next DesiredSet's homes replace the rest"
        );
    }

    #[test]
    fn nothing_is_held_before_the_sessions_desired_set() {
        let mut desired = Desired::default();
        let watched = desired.watch();
        desired.applied("a", None);
        desired.deleted("b", None);
        assert_eq!(desired.holding(), None);
        assert_eq!(*watched.borrow(), None);
    }

    #[test]
    fn a_desired_set_then_applies_and_deletes_each_change_the_holding_and_count() {
        let mut desired = Desired::default();
        let watched = desired.watch();
        desired.replace(mirrors(&["a", "b"]));
        assert_eq!(desired.holding(), held(1, &["a", "b"]));
        desired.applied("c", None);
        assert_eq!(desired.holding(), held(2, &["a", "b", "c"]));
        desired.applied("c", None);
        assert_eq!(
            desired.holding(),
            held(3, &["a", "b", "c"]),
            "a second apply of one UID"
        );
        desired.deleted("a", None);
        assert_eq!(desired.holding(), held(4, &["b", "c"]));
        desired.deleted("x", None);
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
        desired.replace(mirrors(&["a"]));
        desired.applied("b", None);
        desired.replace(mirrors(&["c"]));
        assert_eq!(desired.holding(), held(3, &["c"]));
    }

    #[test]
    fn a_new_session_starts_from_nothing() {
        let mut desired = Desired::default();
        let watched = desired.watch();
        desired.replace(mirrors(&["a"]));
        desired.new_session();
        assert_eq!(desired.holding(), None);
        assert_eq!(*watched.borrow(), None);
        desired.replace(mirrors(&["a"]));
        assert_eq!(desired.holding(), held(1, &["a"]));
    }
}
