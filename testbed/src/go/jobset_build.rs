//! The JobSet release the JobSet tests run, pinned in
//! `tests/controlplane/jobset/go.mod` and built as a [`GoRelease`].

use crate::go::controlplane::Error;
use crate::go::release::{BuiltRelease, GoRelease, KUBEBUILDER_CRDS, KUBEBUILDER_WEBHOOKS};

/// The JobSet release the JobSet tests run.
pub const JOBSET_VERSION: &str = "v0.11.1";

/// JobSet's controller: the module's root package is its `main`.
pub const JOBSET: GoRelease = GoRelease {
    name: "JobSet",
    folder: "jobset",
    version: JOBSET_VERSION,
    module: "sigs.k8s.io/jobset",
    package: "sigs.k8s.io/jobset",
    version_variable: "sigs.k8s.io/jobset/pkg/version.GitVersion",
    crds: KUBEBUILDER_CRDS,
    webhooks: Some(KUBEBUILDER_WEBHOOKS),
};

/// A built JobSet.
pub type JobSetRelease = BuiltRelease;

/// The cached JobSet of the current pin, if it was built before.
pub fn jobset() -> Result<Option<JobSetRelease>, Error> {
    JOBSET.cached()
}

/// Returns the cached JobSet, building it first when it is missing.
pub fn ensure_jobset_built(log: &mut dyn FnMut(&str)) -> Result<JobSetRelease, Error> {
    JOBSET.ensure_built(log)
}
