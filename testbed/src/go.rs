//! The upstream Go parts the test bed runs, each pinned by a wrapper module
//! under `tests/controlplane/` and built into a cache keyed by its version:
//! the Kubernetes control plane, kwok and helm, the Kueue and JobSet
//! releases, cert-manager, an OCI registry, and the container images made
//! without a daemon.

pub mod certmanager_build;
pub mod controlplane;
pub mod helm_build;
pub mod jobset_build;
pub mod kueue_build;
pub mod oci_image;
pub mod registry_build;
pub mod release;
pub mod upstream;
