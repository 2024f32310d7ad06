//! The cert-manager release that issues certificates on the install
//! guide's clusters, pinned in `tests/controlplane/certmanager/go.mod` and
//! built as a [`GoRelease`]: its controller only (the tests register no
//! webhook; a CA Issuer needs neither the webhook nor the CA injector).

use crate::go::controlplane::Error;
use crate::go::release::{BuiltRelease, GoRelease};

/// The cert-manager release the install guide is proven with.
pub const CERT_MANAGER_VERSION: &str = "v1.11.5";

/// cert-manager's controller, `cmd/controller` of the module.
pub const CERT_MANAGER: GoRelease = GoRelease {
    name: "cert-manager",
    folder: "certmanager",
    version: CERT_MANAGER_VERSION,
    module: "github.com/cert-manager/cert-manager",
    package: "github.com/cert-manager/cert-manager/cmd/controller",
    version_variable: "github.com/cert-manager/cert-manager/pkg/util.AppVersion",
    crds: "deploy/crds",
    webhooks: None,
};

/// Returns the cached cert-manager, building it first when it is missing.
pub fn ensure_cert_manager_built(log: &mut dyn FnMut(&str)) -> Result<BuiltRelease, Error> {
    CERT_MANAGER.ensure_built(log)
}
