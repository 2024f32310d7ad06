//! How many log streams the manager keeps open at once: per caller, per
//! cluster (its agent serves a few at a time) and in all. Pure counts; the
//! registry holds them under its lock.

use std::collections::HashMap;

/// Streams one caller may have open at once.
pub const PER_CALLER: usize = 4;
/// Streams open at once through one cluster's agent (the agent serves no
/// more either).
pub const PER_CLUSTER: usize = 8;
/// Streams open at once on this replica.
pub const IN_ALL: usize = 64;

/// Why a stream is not opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "user {user:?} has {PER_CALLER} log streams open, the most one caller may; close one first"
    )]
    Caller { user: String },
    #[error(
        "{PER_CLUSTER} log streams are open through cluster {cluster}'s agent, the most it serves at once; try again shortly"
    )]
    Cluster { cluster: String },
    #[error(
        "{IN_ALL} log streams are open on this manager, the most it serves at once; try again shortly"
    )]
    InAll,
}

/// The streams open, by caller and by cluster.
#[derive(Debug, Default)]
pub struct Counts {
    callers: HashMap<String, usize>,
    clusters: HashMap<String, usize>,
    all: usize,
}

impl Counts {
    /// Counts a stream for `user` through `cluster`, if every limit allows.
    pub fn open(&mut self, user: &str, cluster: &str) -> Result<(), Refused> {
        if self.callers.get(user).copied().unwrap_or(0) >= PER_CALLER {
            return Err(Refused::Caller { user: user.into() });
        }
        if self.clusters.get(cluster).copied().unwrap_or(0) >= PER_CLUSTER {
            return Err(Refused::Cluster {
                cluster: cluster.into(),
            });
        }
        if self.all >= IN_ALL {
            return Err(Refused::InAll);
        }
        *self.callers.entry(user.into()).or_default() += 1;
        *self.clusters.entry(cluster.into()).or_default() += 1;
        self.all += 1;
        Ok(())
    }

    /// Uncounts a stream [`Counts::open`] counted.
    pub fn close(&mut self, user: &str, cluster: &str) {
        let less = |map: &mut HashMap<String, usize>, key: &str| {
            if let Some(n) = map.get_mut(key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    map.remove(key);
                }
            }
        };
        less(&mut self.callers, user);
        less(&mut self.clusters, cluster);
        self.all = self.all.saturating_sub(1);
    }

    pub fn open_in_all(&self) -> usize {
        self.all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_has_a_few_streams_at_once() {
        let mut counts = Counts::default();
        for i in 0..PER_CALLER {
            counts.open("alice", &format!("worker-{i}")).unwrap();
        }
        let refused = counts.open("alice", "worker-9").unwrap_err();
        assert_eq!(
            refused,
            Refused::Caller {
                user: "alice".into()
            }
        );
        counts.open("bob", "worker-9").unwrap();
        counts.close("alice", "worker-0");
        counts.open("alice", "worker-9").unwrap();
    }

    #[test]
    fn a_cluster_serves_a_few_streams_at_once() {
        let mut counts = Counts::default();
        for i in 0..PER_CLUSTER {
            counts.open(&format!("user-{i}"), "worker-1").unwrap();
        }
        let refused = counts.open("another", "worker-1").unwrap_err();
        assert!(refused.to_string().contains("cluster worker-1's agent"));
        counts.open("another", "worker-2").unwrap();
    }

    #[test]
    fn the_manager_serves_so_many_in_all() {
        let mut counts = Counts::default();
        for i in 0..IN_ALL {
            counts
                .open(&format!("user-{i}"), &format!("worker-{i}"))
                .unwrap();
        }
        assert_eq!(counts.open("late", "worker-late"), Err(Refused::InAll));
        counts.close("user-0", "worker-0");
        assert_eq!(counts.open_in_all(), IN_ALL - 1);
        counts.open("late", "worker-late").unwrap();
    }
}
