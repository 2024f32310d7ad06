//! The Kueue release the Kueue tests and the demo run on the manager
//! cluster, pinned in `tests/controlplane/kueue/go.mod` and built as a
//! [`GoRelease`].

use crate::go::controlplane::Error;
use crate::go::release::{BuiltRelease, GoRelease, KUBEBUILDER_CRDS, KUBEBUILDER_WEBHOOKS};

pub use crate::go::controlplane::KUEUE_VERSION;

/// Kueue's `cmd/kueue`.
pub const KUEUE: GoRelease = GoRelease {
    name: "Kueue",
    folder: "kueue",
    version: KUEUE_VERSION,
    module: "sigs.k8s.io/kueue",
    package: "sigs.k8s.io/kueue/cmd/kueue",
    version_variable: "sigs.k8s.io/kueue/pkg/version.GitVersion",
    crds: KUBEBUILDER_CRDS,
    webhooks: Some(KUBEBUILDER_WEBHOOKS),
};

/// A built Kueue.
pub type KueueRelease = BuiltRelease;

/// The cached Kueue of the current pin, if it was built before.
pub fn kueue() -> Result<KueueRelease, Error> {
    match KUEUE.cached()? {
        Some(kueue) => Ok(kueue),
        None => Err(Error::KueueNotBuilt(KUEUE.dir()?)),
    }
}

/// Returns the cached Kueue, building it first when it is missing.
pub fn ensure_kueue_built(log: &mut dyn FnMut(&str)) -> Result<KueueRelease, Error> {
    KUEUE.ensure_built(log)
}
