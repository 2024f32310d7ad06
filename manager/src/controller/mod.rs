//! The Job controller: the thin layer that asks [`crate::job`] what to do
//! for a manager Job and does it — placing it, having its mirror applied or
//! deleted through the fleet, and writing the Job ([`writes`]). Beside it,
//! what it shares with the status copy ([`context`]: and each one's
//! backoff), the Job changes both are fed ([`changes`]) and copies its own
//! writes replaced ([`superseded`]).

pub mod changes;
pub mod context;
pub mod reconcile;
pub mod superseded;
pub mod writes;
