//! Jobs Kueue reserved quota for whose check jobrelay is answering, by Job
//! UID: shared between the admission check controller, which fills it, and
//! the Job controller, which places such a Job while it is still suspended
//! and creates its mirror with the reservation's constraints.

use std::collections::HashMap;
use std::sync::Mutex;

use super::check::Allowed;
use super::scheduling::Scheduling;

/// What placing a reserved Job must respect.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
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
}
