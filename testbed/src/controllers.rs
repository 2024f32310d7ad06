//! The Go controllers run beside Kubernetes on a test cluster (Kueue,
//! JobSet, cert-manager): each release's binary run as a process, its CRDs and webhook
//! configurations installed pointing at it on loopback.

pub mod certmanager;
pub mod jobset;
pub mod kueue;
pub mod manifests;
pub mod process;
