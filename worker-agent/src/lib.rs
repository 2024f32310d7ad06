//! jobrelay worker agent: runs in a worker cluster, dials the manager, applies
//! and deletes mirror Jobs, reports their status, and confirms every Pod gone.

pub mod cli;
