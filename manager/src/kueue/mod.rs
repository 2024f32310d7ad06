//! jobrelay behind Kueue: the controller of `AdmissionCheck`s whose
//! `controllerName` is `jobrelay.dev/manager`.
//!
//! For a Workload with quota reserved and jobrelay's check `Pending`, the
//! owning Job is placed (its assigned flavors' node labels and tolerations
//! recorded on it) and its mirror created suspended, then the check is set
//! `Ready`; Kueue then admits and unsuspends the Job, and the mirror follows
//! — without what the flavors add, unless opted in ([`mirror_scheduling`]).
//! No worker can take it: `Retry`, or `Rejected` with a message a user can act
//! on; a Workload jobrelay cannot relay (not a Job with jobrelay's `managedBy`)
//! is `Rejected` at once ([`owner`]). The decisions are pure ([`check`], [`scheduling`]); [`controller`]
//! watches Kueue's objects and writes the check states.

pub mod active;
pub mod answers;
pub mod check;
pub mod check_input;
mod check_write;
pub mod context;
pub mod controller;
pub mod discovery;
pub mod mirror_scheduling;
pub mod owner;
pub mod parameters;
pub mod reservations;
pub mod retry;
pub mod scheduling;
pub mod types;
pub mod worker_queue;
mod workload_view;

/// The `controllerName` of the AdmissionChecks jobrelay answers.
pub const CONTROLLER_NAME: &str = jobrelay_proto::wire::MANAGED_BY;

pub use reservations::{Reservation, Reservations};
