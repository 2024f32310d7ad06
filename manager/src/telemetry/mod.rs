//! What the manager tells people: Events on the objects a user looks at,
//! and Prometheus metrics.

pub mod events;
pub mod metrics;
