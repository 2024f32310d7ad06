//! What the manager wants on every cluster, summarised for the agents'
//! Heartbeats to be compared with: one scan of every object serves every
//! session for a short while, so a thousand clusters heartbeating every few
//! seconds cost about one scan per [`MAX_AGE`], not one per Heartbeat.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jobrelay_proto::holding::Summary;
use k8s_openapi::jiff::Timestamp;

use crate::job::lifecycle::is_relayed;
use crate::job::placement::assigned_cluster;
use crate::job::retention::keeps_mirror;
use crate::kinds::RelayedKind;

/// How long one scan serves.
pub const MAX_AGE: Duration = Duration::from_secs(1);

/// Each cluster's summary of the mirrors wanted there; a cluster with none
/// is absent.
pub type WantedByCluster = Arc<HashMap<String, Summary>>;

/// The last scan, and when it was made.
#[derive(Debug, Default)]
pub struct WantedCache {
    last: Mutex<Option<(Instant, WantedByCluster)>>,
}

impl WantedCache {
    /// The summaries as of at most [`MAX_AGE`] before `now`, scanning again
    /// with `scan` if the last scan is older. One scan at a time: sessions
    /// that ask meanwhile wait for it rather than scan too.
    pub fn get(
        &self,
        now: Instant,
        scan: impl FnOnce() -> HashMap<String, Summary>,
    ) -> WantedByCluster {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((at, wanted)) = last.as_ref()
            && fresh(*at, now)
        {
            return Arc::clone(wanted);
        }
        let wanted = Arc::new(scan());
        *last = Some((now, Arc::clone(&wanted)));
        wanted
    }
}

/// Whether a scan made `at` still serves at `now`.
fn fresh(at: Instant, now: Instant) -> bool {
    now.saturating_duration_since(at) < MAX_AGE
}

/// Where `object`'s mirror is wanted, if anywhere: a relayed object placed
/// on a cluster, active, or finished with its remote retention not run out.
pub fn wanted_on<K: RelayedKind>(
    object: &K,
    now: Timestamp,
    remote_retention: Duration,
) -> Option<&str> {
    if !is_relayed(object) || !keeps_mirror(object, now, remote_retention) {
        return None;
    }
    assigned_cluster(object)
}

/// Of `objects`, each whose mirror is wanted: where, and its UID.
pub fn wanted_where<K: RelayedKind>(
    objects: &[Arc<K>],
    now: Timestamp,
    remote_retention: Duration,
) -> impl Iterator<Item = (&str, &str)> {
    objects.iter().filter_map(move |object| {
        let cluster = wanted_on(object.as_ref(), now, remote_retention)?;
        Some((cluster, object.meta().uid.as_deref()?))
    })
}

/// The summary of each cluster's origin UIDs.
pub fn summarise<'a>(wanted: impl Iterator<Item = (&'a str, &'a str)>) -> HashMap<String, Summary> {
    let mut by_cluster: HashMap<String, Summary> = HashMap::new();
    for (cluster, uid) in wanted {
        match by_cluster.get_mut(cluster) {
            Some(summary) => summary.add(uid),
            None => {
                let mut summary = Summary::default();
                summary.add(uid);
                by_cluster.insert(cluster.to_string(), summary);
            }
        }
    }
    by_cluster
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(uids: &[&str]) -> HashMap<String, Summary> {
        HashMap::from([("w1".to_string(), Summary::of(uids.iter().copied()))])
    }

    #[test]
    fn one_scan_serves_until_it_is_max_age_old() {
        let cache = WantedCache::default();
        let start = Instant::now();
        let first = cache.get(start, || scan(&["a"]));
        assert_eq!(first["w1"], Summary::of(["a"]));
        let served = cache.get(start + MAX_AGE / 2, || panic!("no second scan while fresh"));
        assert_eq!(served, first);
        let again = cache.get(start + MAX_AGE, || scan(&["a", "b"]));
        assert_eq!(
            again["w1"],
            Summary::of(["a", "b"]),
            "scanned again once stale"
        );
    }

    #[test]
    fn a_scan_is_fresh_for_less_than_max_age() {
        let at = Instant::now();
        assert!(fresh(at, at));
        assert!(fresh(at, at + MAX_AGE - Duration::from_millis(1)));
        assert!(!fresh(at, at + MAX_AGE));
    }
}
