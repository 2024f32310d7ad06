//! Copies of manager Jobs that this replica's own writes replaced.
//!
//! The Job cache lags behind the API server: right after a reconcile wrote a
//! Job (held it, unplaced it, released its finalizer), the next reconcile of
//! that Job may still read the copy from before the write, and act on what is
//! no longer true — send the mirror of a Job it just unplaced, say. Each write
//! records the resourceVersion it replaced; a reconcile handed exactly that
//! copy waits for the cache to catch up instead (the watch event of the write
//! triggers it again). A record is dropped once a newer copy is seen, or after
//! [`MAX_LAG`], so a write whose event never comes (the Job was deleted)
//! leaves nothing behind for long.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a replaced copy is remembered at most: far longer than a watch
/// event takes to arrive, even on a busy API server.
pub const MAX_LAG: Duration = Duration::from_secs(30);

/// When to look at a Job again whose copy was stale, should its watch event
/// not trigger a reconcile first.
pub const RECHECK: Duration = Duration::from_secs(1);

/// Records at which the map is swept of expired ones.
const SWEEP_AT: usize = 1024;

#[derive(Debug, Default)]
pub struct Superseded {
    /// Job UID → the copies its last writes replaced.
    replaced: Mutex<HashMap<String, Record>>,
}

#[derive(Debug)]
struct Record {
    /// resourceVersions that writes replaced: the copy a reconcile started
    /// from, and what each of its writes but the last left.
    stale: Vec<String>,
    /// What the last write left.
    latest: String,
    at: Instant,
}

impl Superseded {
    /// Records a write that took Job `uid` from resourceVersion `before` to
    /// `after` (`None`: nothing was written, or the Job is gone).
    pub fn wrote(&self, uid: &str, before: Option<&str>, after: Option<&str>, now: Instant) {
        let (Some(before), Some(after)) = (before, after) else {
            return;
        };
        if before == after {
            return;
        }
        let mut replaced = self.replaced.lock().unwrap_or_else(PoisonError::into_inner);
        if replaced.len() >= SWEEP_AT {
            replaced.retain(|_, record| now.duration_since(record.at) < MAX_LAG);
        }
        let mut stale = vec![before.to_string()];
        if let Some(earlier) = replaced.remove(uid) {
            // A second write from the same copy replaced what the first left.
            stale.extend(earlier.stale);
            stale.push(earlier.latest);
            stale.retain(|version| version != after);
        }
        replaced.insert(
            uid.to_string(),
            Record {
                stale,
                latest: after.to_string(),
                at: now,
            },
        );
    }

    /// Whether `copy` (a resourceVersion) of Job `uid` is one that a write of
    /// this replica replaced less than [`MAX_LAG`] ago. Any other copy is
    /// newer (resourceVersions are only compared for equality): the record is
    /// dropped.
    pub fn is_stale(&self, uid: &str, copy: Option<&str>, now: Instant) -> bool {
        let mut replaced = self.replaced.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(record) = replaced.get(uid) else {
            return false;
        };
        if copy.is_some_and(|copy| record.stale.iter().any(|v| v == copy))
            && now.duration_since(record.at) < MAX_LAG
        {
            return true;
        }
        replaced.remove(uid);
        false
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.replaced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_a_write_replaced_is_stale_until_a_newer_one_is_seen() {
        let (superseded, now) = (Superseded::default(), Instant::now());
        superseded.wrote("u1", Some("10"), Some("11"), now);
        assert!(superseded.is_stale("u1", Some("10"), now));
        assert!(
            superseded.is_stale("u1", Some("10"), now),
            "until caught up"
        );
        assert!(!superseded.is_stale("u1", Some("11"), now));
        assert!(
            !superseded.is_stale("u1", Some("10"), now),
            "once a newer copy was seen, the record is gone"
        );
        assert_eq!(superseded.len(), 0);
    }

    #[test]
    fn other_jobs_and_writes_that_changed_nothing_are_never_stale() {
        let (superseded, now) = (Superseded::default(), Instant::now());
        superseded.wrote("u1", Some("10"), Some("11"), now);
        assert!(!superseded.is_stale("u2", Some("10"), now));
        superseded.wrote("u3", Some("20"), Some("20"), now);
        superseded.wrote("u4", Some("30"), None, now);
        superseded.wrote("u5", None, Some("41"), now);
        assert!(!superseded.is_stale("u3", Some("20"), now), "a no-op patch");
        assert!(
            !superseded.is_stale("u4", Some("30"), now),
            "nothing written"
        );
        assert!(!superseded.is_stale("u5", None, now));
    }

    #[test]
    fn every_copy_before_the_last_of_several_writes_is_stale() {
        let (superseded, now) = (Superseded::default(), Instant::now());
        // One reconcile, two writes, both from the copy it was handed.
        superseded.wrote("u1", Some("10"), Some("11"), now);
        superseded.wrote("u1", Some("10"), Some("12"), now);
        assert!(superseded.is_stale("u1", Some("10"), now));
        assert!(superseded.is_stale("u1", Some("11"), now));
        assert!(!superseded.is_stale("u1", Some("12"), now));
        assert!(!superseded.is_stale("u1", Some("11"), now));
    }

    #[test]
    fn a_record_whose_event_never_came_expires() {
        let (superseded, now) = (Superseded::default(), Instant::now());
        superseded.wrote("u1", Some("10"), Some("11"), now);
        assert!(!superseded.is_stale("u1", Some("10"), now + MAX_LAG));
        assert_eq!(superseded.len(), 0);
    }

    #[test]
    fn expired_records_are_swept_once_many_are_kept() {
        let (superseded, now) = (Superseded::default(), Instant::now());
        for i in 0..SWEEP_AT {
            superseded.wrote(&format!("old-{i}"), Some("1"), Some("2"), now);
        }
        superseded.wrote("new", Some("1"), Some("2"), now + MAX_LAG);
        assert_eq!(superseded.len(), 1);
        assert!(superseded.is_stale("new", Some("1"), now + MAX_LAG));
    }
}
