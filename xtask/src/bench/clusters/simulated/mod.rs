//! A simulated fleet for `cargo xtask bench --clusters`: many agents in
//! this process, each a registered WorkerCluster with a client certificate
//! of its own and a real session with the real manager. Only the workers
//! are simulated ([`agent`], [`worker`]); what is measured with it is the
//! manager's side, never a worker's behaviour.

pub mod agent;
pub mod worker;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use jobrelay_agent::Dial;
use jobrelay_process::Pem;
use jobrelay_testbed::certs::RelayCa;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use agent::Agent;
use worker::CleanupDelays;

/// What the simulated agents saw, for the bench to read.
#[derive(Default)]
pub struct Record {
    sessions: AtomicU64,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    /// By cluster, its latest session.
    latest: HashMap<String, Session>,
    /// By origin UID, where and when it was first applied.
    applied: HashMap<String, (String, Instant)>,
    /// Applies of a mirror already applied on another cluster.
    applied_elsewhere: usize,
    /// Applies of a mirror again on the cluster that holds it.
    reapplied: usize,
    deletes: HashMap<String, Instant>,
    completed: HashMap<String, Instant>,
}

/// One session of a cluster.
#[derive(Debug, Clone, Copy)]
pub struct Session {
    pub id: u64,
    pub opened: Instant,
    pub epoch: Option<i64>,
    /// When its DesiredSet arrived.
    pub desired: Option<Instant>,
}

impl Record {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn session_opened(&self, cluster: &str) -> u64 {
        let id = self.sessions.fetch_add(1, Ordering::Relaxed) + 1;
        let session = Session {
            id,
            opened: Instant::now(),
            epoch: None,
            desired: None,
        };
        self.seen().latest.insert(cluster.into(), session);
        id
    }

    fn in_session(&self, cluster: &str, id: u64, change: impl FnOnce(&mut Session)) {
        if let Some(session) = self.seen().latest.get_mut(cluster)
            && session.id == id
        {
            change(session);
        }
    }

    pub(super) fn welcomed(&self, cluster: &str, id: u64, epoch: i64) {
        self.in_session(cluster, id, |s| s.epoch = Some(epoch));
    }

    pub(super) fn desired(&self, cluster: &str, id: u64) {
        self.in_session(cluster, id, |s| s.desired = Some(Instant::now()));
    }

    pub(super) fn applied(&self, cluster: &str, uid: &str) {
        let mut seen = self.seen();
        match seen.applied.get(uid) {
            Some((first, _)) if first == cluster => seen.reapplied += 1,
            Some(_) => seen.applied_elsewhere += 1,
            None => {
                seen.applied
                    .insert(uid.into(), (cluster.into(), Instant::now()));
            }
        }
    }

    pub(super) fn delete_received(&self, uid: &str) {
        self.seen()
            .deletes
            .entry(uid.into())
            .or_insert_with(Instant::now);
    }

    pub(super) fn completed(&self, uid: &str) {
        self.seen()
            .completed
            .entry(uid.into())
            .or_insert_with(Instant::now);
    }

    /// Every cluster's latest session.
    pub fn sessions(&self) -> HashMap<String, Session> {
        self.seen().latest.clone()
    }

    /// When each mirror was first applied, by origin UID.
    pub fn applied_at(&self) -> HashMap<String, Instant> {
        self.seen()
            .applied
            .iter()
            .map(|(u, (_, at))| (u.clone(), *at))
            .collect()
    }

    /// Of the mirrors of `uids`, how many each cluster was given.
    pub fn per_cluster<'a>(
        &self,
        uids: impl Iterator<Item = &'a String>,
    ) -> HashMap<String, usize> {
        let seen = self.seen();
        let mut counts = HashMap::new();
        for (cluster, _) in uids.filter_map(|uid| seen.applied.get(uid)) {
            *counts.entry(cluster.clone()).or_default() += 1;
        }
        counts
    }

    /// (applied on a second cluster, applied again on the same one).
    pub fn applied_twice(&self) -> (usize, usize) {
        let seen = self.seen();
        (seen.applied_elsewhere, seen.reapplied)
    }

    /// When each delete arrived, by origin UID.
    pub fn deletes(&self) -> HashMap<String, Instant> {
        self.seen().deletes.clone()
    }

    /// When each mirror was reported Complete, by origin UID.
    pub fn completed_at(&self) -> HashMap<String, Instant> {
        self.seen().completed.clone()
    }
}

/// The simulated agents, aborted when dropped.
pub struct Fleet {
    pub record: Arc<Record>,
    delays: Arc<CleanupDelays>,
    agents: Vec<JoinHandle<()>>,
}

impl Fleet {
    pub fn new(delays: CleanupDelays) -> Fleet {
        Fleet {
            record: Arc::default(),
            delays: Arc::new(delays),
            agents: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.agents.len()
    }

    /// Stops every agent but the first `n`: their sessions end, as when an
    /// agent is uninstalled.
    pub fn shrink_to(&mut self, n: usize) {
        if n < self.agents.len() {
            self.agents.drain(n..).for_each(|agent| agent.abort());
        }
    }

    /// Starts an agent for each of `clusters` (registered already), its
    /// client certificate issued by `ca`, dialling `urls` in turn.
    pub fn grow(
        &mut self,
        clusters: &[String],
        urls: &[String],
        ca: &RelayCa,
    ) -> anyhow::Result<()> {
        for cluster in clusters {
            let issued = ca.client(cluster)?;
            let pem = Pem {
                cert: issued.cert.into_bytes(),
                key: issued.key.into_bytes(),
                ca: ca.ca_pem.clone().into_bytes(),
            };
            let (_, tls) = watch::channel(Arc::new(pem));
            let agent = Agent {
                cluster: cluster.clone(),
                dial: Dial::new(urls.to_vec(), Some(tls)),
                record: Arc::clone(&self.record),
                delays: Arc::clone(&self.delays),
            };
            self.agents.push(tokio::spawn(agent.run()));
        }
        Ok(())
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.agents.iter().for_each(JoinHandle::abort);
    }
}

/// `sim-0001` …: the names of a fleet's first `n` clusters.
pub fn names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("sim-{i:04}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_applied_on_a_second_cluster_is_counted_apart_from_a_reapply() {
        let record = Record::default();
        record.applied("sim-0001", "u1");
        record.applied("sim-0001", "u1");
        record.applied("sim-0002", "u1");
        record.applied("sim-0002", "u2");
        assert_eq!(record.applied_twice(), (1, 1));
        let uids = ["u1".to_string(), "u2".to_string()];
        assert_eq!(record.per_cluster(uids.iter())["sim-0001"], 1);
        assert_eq!(record.per_cluster(uids[1..].iter())["sim-0002"], 1);
        assert_eq!(record.applied_at().len(), 2);
    }

    #[test]
    fn only_the_latest_session_of_a_cluster_takes_its_welcome_and_desired_set() {
        let record = Record::default();
        let old = record.session_opened("sim-0001");
        let new = record.session_opened("sim-0001");
        record.welcomed("sim-0001", old, 1);
        record.desired("sim-0001", old);
        let latest = record.sessions()["sim-0001"];
        assert_eq!((latest.id, latest.epoch, latest.desired), (new, None, None));
        record.welcomed("sim-0001", new, 2);
        record.desired("sim-0001", new);
        let latest = record.sessions()["sim-0001"];
        assert_eq!(latest.epoch, Some(2));
        assert!(latest.desired.is_some());
    }

    #[test]
    fn cluster_names_sort_in_order() {
        assert_eq!(names(2), ["sim-0001", "sim-0002"]);
    }
}
