//! The agent's desired set as both sides summarise it for anti-entropy: a
//! count and an order-independent digest of origin UIDs ([`Summary`]), and
//! the set that keeps its summary up to date as it changes ([`OriginUids`]).
//! The agent sends its summary in each Heartbeat ([`crate::v1::Holding`]);
//! the manager builds the same summary of what it wants on the cluster and
//! compares the two.

use std::collections::HashSet;
use std::collections::hash_set;

use sha2::{Digest, Sha256};

/// How many origin UIDs a set holds, and the XOR of their fingerprints: two
/// sets with the same UIDs have the same summary, whatever the order they
/// were built in, and adding or removing one UID costs one hash.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Summary {
    pub mirrors: u32,
    pub digest: u64,
}

impl Summary {
    /// The summary of `uids`, each counted once however often it comes.
    pub fn of<'a>(uids: impl IntoIterator<Item = &'a str>) -> Summary {
        let mut summary = Summary::default();
        let unique: HashSet<&str> = uids.into_iter().collect();
        for uid in unique {
            summary.add(uid);
        }
        summary
    }

    /// Counts `uid` in; the caller makes sure it was not counted before.
    pub fn add(&mut self, uid: &str) {
        self.mirrors = self.mirrors.saturating_add(1);
        self.digest ^= fingerprint(uid);
    }

    /// Counts `uid` out; the caller makes sure it was counted.
    pub fn remove(&mut self, uid: &str) {
        self.mirrors = self.mirrors.saturating_sub(1);
        self.digest ^= fingerprint(uid);
    }

    /// The Heartbeat's form, after `received` set-changing messages.
    pub fn holding(self, received: u64) -> crate::v1::Holding {
        crate::v1::Holding {
            received,
            mirrors: self.mirrors,
            digest: self.digest,
        }
    }
}

impl From<&crate::v1::Holding> for Summary {
    fn from(holding: &crate::v1::Holding) -> Summary {
        Summary {
            mirrors: holding.mirrors,
            digest: holding.digest,
        }
    }
}

/// The first 8 bytes, big-endian, of the SHA-256 of `uid`.
pub fn fingerprint(uid: &str) -> u64 {
    let hash = Sha256::digest(uid.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash[..8]);
    u64::from_be_bytes(first)
}

/// A set of origin UIDs that keeps its [`Summary`] as it changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OriginUids {
    uids: HashSet<String>,
    summary: Summary,
}

impl OriginUids {
    /// Adds `uid`; says whether it was new.
    pub fn insert(&mut self, uid: String) -> bool {
        if self.uids.contains(&uid) {
            return false;
        }
        self.summary.add(&uid);
        self.uids.insert(uid)
    }

    /// Removes `uid`; says whether it was there.
    pub fn remove(&mut self, uid: &str) -> bool {
        let removed = self.uids.remove(uid);
        if removed {
            self.summary.remove(uid);
        }
        removed
    }

    /// Replaces every UID with `uids`.
    pub fn replace(&mut self, uids: impl IntoIterator<Item = String>) {
        *self = uids.into_iter().collect();
    }

    pub fn contains(&self, uid: &str) -> bool {
        self.uids.contains(uid)
    }

    pub fn iter(&self) -> hash_set::Iter<'_, String> {
        self.uids.iter()
    }

    pub fn len(&self) -> usize {
        self.uids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.uids.is_empty()
    }

    /// Its count and digest.
    pub fn summary(&self) -> Summary {
        self.summary
    }
}

impl FromIterator<String> for OriginUids {
    fn from_iter<I: IntoIterator<Item = String>>(uids: I) -> Self {
        let mut set = OriginUids::default();
        for uid in uids {
            set.insert(uid);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(uids: &[&str]) -> OriginUids {
        uids.iter().map(|uid| uid.to_string()).collect()
    }

    #[test]
    fn the_summary_does_not_depend_on_the_order() {
        assert_eq!(
            set(&["a", "b", "c"]).summary(),
            set(&["c", "a", "b"]).summary()
        );
        assert_eq!(
            set(&["a", "b", "c"]).summary(),
            Summary::of(["b", "c", "a"])
        );
    }

    #[test]
    fn a_uid_inserted_twice_counts_once() {
        let mut uids = set(&["a"]);
        assert!(!uids.insert("a".into()));
        assert_eq!(uids.summary(), set(&["a"]).summary());
        assert_eq!(uids.summary().mirrors, 1);
        assert_eq!(Summary::of(["a", "a"]), uids.summary());
    }

    #[test]
    fn removing_restores_the_summary_before_the_insert() {
        let mut uids = set(&["a", "b"]);
        let before = uids.summary();
        assert!(uids.insert("c".into()));
        assert_ne!(uids.summary(), before);
        assert!(uids.remove("c"));
        assert_eq!(uids.summary(), before);
        assert!(
            !uids.remove("c"),
            "removing what is not there changes nothing"
        );
        assert_eq!(uids.summary(), before);
    }

    #[test]
    fn replacing_gives_the_summary_of_the_new_set() {
        let mut uids = set(&["a", "b"]);
        uids.replace(["c".to_string(), "d".to_string()]);
        assert_eq!(uids.summary(), set(&["d", "c"]).summary());
        assert!(uids.contains("c") && !uids.contains("a"));
        assert_eq!(uids.len(), 2);
    }

    #[test]
    fn the_empty_set_and_sets_that_differ() {
        assert_eq!(OriginUids::default().summary(), Summary::default());
        assert_ne!(set(&["a"]).summary(), set(&["b"]).summary());
        assert_ne!(set(&["a", "b"]).summary().digest, 0);
    }

    #[test]
    fn the_fingerprint_is_the_first_eight_bytes_of_the_sha256() {
        // SHA-256("abc") = ba7816bf 8f01cfea ...
        assert_eq!(fingerprint("abc"), 0xba78_16bf_8f01_cfea);
    }

    #[test]
    fn the_heartbeat_form_carries_the_summary_and_the_count() {
        let summary = set(&["a"]).summary();
        let holding = summary.holding(7);
        assert_eq!(holding.received, 7);
        assert_eq!(Summary::from(&holding), summary);
    }
}
