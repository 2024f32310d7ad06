//! Every upstream part the tests run, built or found: the Kubernetes control
//! plane, helm and Kueue. Each is cached by its own pin (`controlplane`,
//! `helm_build`, `kueue_build`); this asks for all of them at once.

use crate::go::controlplane::{Binaries, Error, KUBERNETES_VERSION, build, cached};
use crate::go::helm_build::ensure_helm_built;
use crate::go::kueue_build::ensure_kueue_built;

/// Returns the cached binaries, building them first when they are missing;
/// helm is built (or found) too, so a fresh machine gets everything the tests
/// use. `log` receives one line per step.
pub fn ensure_built(log: &mut dyn FnMut(&str)) -> Result<Binaries, Error> {
    let binaries = match cached() {
        Ok(binaries) => {
            log(&format!(
                "control plane {KUBERNETES_VERSION} cached in {}",
                binaries.dir().display()
            ));
            binaries
        }
        Err(_) => build(log)?,
    };
    ensure_helm_built(log)?;
    ensure_kueue_built(log)?;
    Ok(binaries)
}
