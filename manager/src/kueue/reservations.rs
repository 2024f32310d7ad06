//! Jobs Kueue reserved quota for whose check jobrelay is answering, by Job
//! UID: shared between the admission check controller, which fills it, and
//! the Job controller, which places such a Job while it is still suspended
//! and creates its mirror with the reservation's constraints. It also carries
//! the withdrawals the admission check asks of the Job controller: mirrors
//! of evicted Jobs, and of Jobs whose worker's own Kueue did not admit them;
//! and, until done, the moves the Job controller began itself of mirrors
//! whose Pods found no node ([`crate::job::stuck`]).

use crate::job::withdrawal::Withdrawal;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::runtime::reflector::ObjectRef;

use super::check::Allowed;
use super::scheduling::Scheduling;
use super::types::Workload;
use crate::kinds::Key;

/// What placing a reserved Job must respect.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    /// The relayed object (a Job, a JobSet) the Workload is of.
    pub job: Key,
    pub workload: ObjectRef<Workload>,
    /// The clusters the check allows.
    pub allowed: Allowed,
    /// The assigned flavors' constraints, for the suspended mirror.
    pub scheduling: Scheduling,
}

#[derive(Debug, Default)]
pub struct Reservations {
    /// Each reservation with when it was first held.
    by_job: Mutex<HashMap<String, (Reservation, Instant)>>,
    withdrawals: Mutex<HashMap<String, Withdrawal>>,
    /// By their Job: admitted Workloads, so that a change of the mirror
    /// (its Pods finding no node, its worker's Kueue evicting it) wakes
    /// them.
    admitted: Mutex<HashMap<Key, ObjectRef<Workload>>>,
    /// Whether Kueue runs on the manager cluster; `None` until first looked
    /// for.
    manager_kueue: Mutex<Option<bool>>,
}

impl Reservations {
    /// Records (or replaces) the reservation of a Job; true if it is new or
    /// changed. A replaced reservation keeps the moment it was first held.
    pub fn hold(&self, job_uid: &str, reservation: Reservation) -> bool {
        let mut by_job = self.by_job.lock().unwrap_or_else(|p| p.into_inner());
        let since = by_job.get(job_uid).map_or_else(Instant::now, |(_, at)| *at);
        by_job
            .insert(job_uid.to_string(), (reservation.clone(), since))
            .map(|(r, _)| r)
            != Some(reservation)
    }

    /// Drops a Job's reservation (the check left Pending, or quota went).
    pub fn release(&self, job_uid: &str) {
        let mut by_job = self.by_job.lock().unwrap_or_else(|p| p.into_inner());
        by_job.remove(job_uid);
    }

    pub fn get(&self, job_uid: &str) -> Option<Reservation> {
        let by_job = self.by_job.lock().unwrap_or_else(|p| p.into_inner());
        by_job.get(job_uid).map(|(r, _)| r.clone())
    }

    /// When the Job's reservation was first held.
    pub fn since(&self, job_uid: &str) -> Option<Instant> {
        let by_job = self.by_job.lock().unwrap_or_else(|p| p.into_inner());
        by_job.get(job_uid).map(|(_, since)| *since)
    }

    /// How long the Job's reservation has been held (zero if none is).
    pub fn held_for(&self, job_uid: &str) -> Duration {
        self.since(job_uid)
            .map_or(Duration::ZERO, |since| since.elapsed())
    }

    /// Asks for the Job's mirror to be withdrawn; an earlier request of the
    /// same Job stands. True if the request is new.
    pub fn withdraw(&self, job_uid: &str, withdrawal: Withdrawal) -> bool {
        let mut withdrawals = self.withdrawals.lock().unwrap_or_else(|p| p.into_inner());
        if withdrawals.contains_key(job_uid) {
            return false;
        }
        withdrawals.insert(job_uid.to_string(), withdrawal);
        true
    }

    /// The withdrawal asked of the Job, until it is done.
    pub fn withdrawal(&self, job_uid: &str) -> Option<Withdrawal> {
        let withdrawals = self.withdrawals.lock().unwrap_or_else(|p| p.into_inner());
        withdrawals.get(job_uid).cloned()
    }

    /// Records whether Kueue runs on the manager cluster.
    pub fn set_manager_kueue(&self, installed: bool) {
        *self.manager_kueue.lock().unwrap_or_else(|p| p.into_inner()) = Some(installed);
    }

    /// Whether Kueue runs on the manager cluster; `None` until known.
    pub fn manager_kueue(&self) -> Option<bool> {
        *self.manager_kueue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The Job (`job_uid`, `job`) was unplaced (or went): its withdrawal is
    /// done, and its Workload no longer watched.
    pub fn withdrawn(&self, job_uid: &str, job: &Key) {
        let mut withdrawals = self.withdrawals.lock().unwrap_or_else(|p| p.into_inner());
        withdrawals.remove(job_uid);
        self.admitted(job, None);
    }

    /// The Job's Workload is admitted (`Some`), or no longer (`None`).
    pub fn admitted(&self, job: &Key, workload: Option<ObjectRef<Workload>>) {
        let mut admitted = self.admitted.lock().unwrap_or_else(|p| p.into_inner());
        match workload {
            Some(workload) => admitted.insert(job.clone(), workload),
            None => admitted.remove(job),
        };
    }

    /// The Workload waiting on `job`, if it holds a reservation or is
    /// admitted: what a change of the Job or its mirror should wake.
    pub fn workload_of(&self, job: &Key) -> Option<ObjectRef<Workload>> {
        let by_job = self.by_job.lock().unwrap_or_else(|p| p.into_inner());
        let reserved = by_job.values().find(|(r, _)| r.job == *job);
        if let Some((reservation, _)) = reserved {
            return Some(reservation.workload.clone());
        }
        drop(by_job);
        let admitted = self.admitted.lock().unwrap_or_else(|p| p.into_inner());
        admitted.get(job).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;

    fn job(name: &str) -> Key {
        Key::of(&ObjectRef::<Job>::new(name).within("ns"))
    }

    fn reservation(name: &str, allowed: Allowed) -> Reservation {
        Reservation {
            job: job(name),
            workload: ObjectRef::new(&format!("job-{name}")).within("ns"),
            allowed,
            scheduling: Scheduling::default(),
        }
    }

    #[test]
    fn a_reservation_is_news_only_when_new_or_changed_and_wakes_its_workload() {
        let reservations = Reservations::default();
        assert!(reservations.hold("u1", reservation("a", Allowed::Any)));
        assert!(!reservations.hold("u1", reservation("a", Allowed::Any)));
        let only = Allowed::Only(["w1".to_string()].into());
        assert!(reservations.hold("u1", reservation("a", only)));
        assert_eq!(
            reservations.workload_of(&job("a")),
            Some(ObjectRef::new("job-a").within("ns"))
        );
        assert_eq!(reservations.workload_of(&job("b")), None);
        reservations.release("u1");
        assert!(reservations.get("u1").is_none());
        assert_eq!(reservations.workload_of(&job("a")), None);
    }

    #[test]
    fn an_admitted_workload_is_woken_until_its_job_goes() {
        let reservations = Reservations::default();
        let workload = ObjectRef::new("job-a").within("ns");
        reservations.admitted(&job("a"), Some(workload.clone()));
        assert_eq!(reservations.workload_of(&job("a")), Some(workload.clone()));
        reservations.admitted(&job("a"), None);
        assert_eq!(reservations.workload_of(&job("a")), None);
        reservations.admitted(&job("a"), Some(workload));
        reservations.withdrawn("u1", &job("a"));
        assert_eq!(
            reservations.workload_of(&job("a")),
            None,
            "unplaced or gone: nothing to wake"
        );
    }

    #[test]
    fn a_reservation_keeps_the_moment_it_was_first_held() {
        let reservations = Reservations::default();
        assert_eq!(reservations.held_for("u1"), Duration::ZERO);
        reservations.hold("u1", reservation("a", Allowed::Any));
        let since = reservations.since("u1");
        assert!(since.is_some());
        reservations.hold(
            "u1",
            reservation("a", Allowed::Only(["w1".to_string()].into())),
        );
        assert_eq!(reservations.since("u1"), since, "replaced, not restarted");
        reservations.release("u1");
        assert_eq!(reservations.held_for("u1"), Duration::ZERO);
    }

    #[test]
    fn a_withdrawal_stands_as_first_asked_until_done() {
        let reservations = Reservations::default();
        let late = Withdrawal {
            why: "not admitted in time".into(),
            not_admitted: true,
            ..Withdrawal::default()
        };
        assert!(reservations.withdraw("u1", late.clone()));
        let evicted = Withdrawal {
            why: "evicted".into(),
            ..Withdrawal::default()
        };
        assert!(!reservations.withdraw("u1", evicted.clone()));
        assert_eq!(reservations.withdrawal("u1"), Some(late));
        reservations.withdrawn("u1", &job("a"));
        assert_eq!(reservations.withdrawal("u1"), None);
        assert!(reservations.withdraw("u1", evicted));
    }
}
