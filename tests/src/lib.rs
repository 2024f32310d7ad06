//! The jobrelay test kit: real Kubernetes control planes on loopback
//! (built from the upstream Go modules and cached), a supervisor process that
//! ties their lifetime to the test, wait helpers with deadlines, Job
//! fixtures whose Pods kwok runs the way a test asks, real nodes
//! (kubelet, containerd, runc) where Pods must run as containers, and the
//! Kueue and JobSet controllers built from their releases.

pub mod audit;
pub mod binaries;
pub mod certs;
pub mod cluster;
pub mod cluster_config;
pub mod cluster_ready;
pub mod controlplane;
pub mod deploy;
pub mod deployed;
pub mod election;
pub mod fixtures;
pub mod flood;
pub mod go_release;
pub mod helm;
pub mod images;
pub mod jobset;
pub mod jobset_build;
pub mod kit;
pub mod kueue;
pub mod kueue_build;
pub mod kueue_objects;
pub mod leaks;
pub mod node;
pub mod node_info;
pub mod oci_image;
pub mod ports;
pub mod processes;
pub mod proxy;
pub mod registration;
pub mod relay;
pub mod running;
pub mod scenario;
pub mod supervisor;
pub mod upstream;
pub mod wait;
