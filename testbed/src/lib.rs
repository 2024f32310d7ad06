//! The jobrelay test bed: real Kubernetes control planes on loopback (built
//! from the upstream Go modules and cached), a supervisor process that ties
//! their lifetime to the test, real nodes (kubelet, containerd, runc) where
//! Pods must run as containers, jobrelay's manager and agents run as their
//! binaries or installed with the chart, the Kueue and JobSet controllers
//! built from their releases, wait helpers with deadlines, and the objects
//! tests and the bench create and check on those clusters.

pub mod certs;
pub mod cluster;
pub mod controllers;
pub mod deploy;
pub mod go;
pub mod host;
pub mod kit;
pub mod objects;
pub mod relay;
pub mod wait;
