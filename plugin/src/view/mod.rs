//! The plugin's pure core: manager Jobs, their Kueue Workloads, Events and
//! WorkerClusters read into plain facts a person can act on. Nothing here
//! talks to an API server; every decision is tested over plain objects.

pub mod age;
pub mod annotations;
pub mod cluster;
pub mod description;
pub mod events;
pub mod job;
pub mod kueue;
pub mod mirror;
pub mod pods;
pub mod quantity;
pub mod status_row;
