//! What tests and the bench create and check on the clusters: Jobs whose
//! Pods kwok runs as asked, Kueue's objects, and the leak check.

pub mod fixtures;
pub mod kueue_objects;
pub mod leaks;
