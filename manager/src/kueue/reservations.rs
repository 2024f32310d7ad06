//! Jobs Kueue reserved quota for whose check jobrelay is answering, by Job
//! UID: shared between the admission check controller, which fills it, and
//! the Job controller, which places such a Job while it is still suspended
//! and creates its mirror with the reservation's constraints.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::batch::v1::Job;
use kube::runtime::reflector::ObjectRef;

use super::check::Allowed;
use super::scheduling::Scheduling;
use super::types::Workload;

/// What placing a reserved Job must respect.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub job: ObjectRef<Job>,
    pub workload: ObjectRef<Workload>,
    /// The clusters the check allows.
    pub allowed: Allowed,
    /// The assigned flavors' constraints, for the suspended mirror.
    pub scheduling: Scheduling,
}

#[derive(Debug, Default)]
pub struct Reservations {
    by_job: Mutex<HashMap<String, Reservation>>,
}

impl Reservations {
    /// Records (or replaces) the reservation of a Job; true if it is new or
    /// changed.
    pub fn hold(&self, job_uid: &str, reservation: Reservation) -> bool {
        let mut by_job = self.by_job.lock().unwrap_or_else(|p| p.into_inner());
        by_job.insert(job_uid.to_string(), reservation.clone()) != Some(reservation)
    }

    /// Drops a Job's reservation (the check left Pending, or quota went).
    pub fn release(&self, job_uid: &str) {
        let mut by_job = self.by_job.lock().unwrap_or_else(|p| p.into_inner());
        by_job.remove(job_uid);
    }

    pub fn get(&self, job_uid: &str) -> Option<Reservation> {
        let by_job = self.by_job.lock().unwrap_or_else(|p| p.into_inner());
        by_job.get(job_uid).cloned()
    }

    /// The Workload waiting on `job`, if it holds a reservation: what a
    /// change of the Job or its mirror should wake.
    pub fn workload_of(&self, job: &ObjectRef<Job>) -> Option<ObjectRef<Workload>> {
        let by_job = self.by_job.lock().unwrap_or_else(|p| p.into_inner());
        by_job
            .values()
            .find(|r| r.job == *job)
            .map(|r| r.workload.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reservation(job: &str, allowed: Allowed) -> Reservation {
        Reservation {
            job: ObjectRef::new(job).within("ns"),
            workload: ObjectRef::new(&format!("job-{job}")).within("ns"),
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
            reservations.workload_of(&ObjectRef::new("a").within("ns")),
            Some(ObjectRef::new("job-a").within("ns"))
        );
        assert_eq!(
            reservations.workload_of(&ObjectRef::new("b").within("ns")),
            None
        );
        reservations.release("u1");
        assert!(reservations.get("u1").is_none());
        assert_eq!(
            reservations.workload_of(&ObjectRef::new("a").within("ns")),
            None
        );
    }
}
