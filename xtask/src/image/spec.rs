//! What a jobrelay image is on one platform, given its static binary and
//! the workspace's facts: two layers (the /etc files, which every image and
//! platform share; then the binary), run as `nonroot`, labelled for where
//! it came from.

use std::collections::BTreeMap;

use super::archive::File;
use super::oci::{ImageSpec, Platform};
use super::rootfs::{self, NONROOT_ID};

/// The repository URL in the images' `org.opencontainers.image.source` label.
pub const SOURCE_URL: &str = "https://github.com/jobrelay/jobrelay";

/// Where a binary goes in its image.
const BIN_DIR: &str = "/usr/local/bin";

/// Everything one platform's image is built from; all of it read before
/// building.
#[derive(Clone, Debug)]
pub struct Inputs {
    /// The binary's name, e.g. `jobrelay-manager`.
    pub binary: String,
    pub platform: Platform,
    /// The package version, for the version label.
    pub version: String,
    /// The git commit the binary was built from, or `unknown`.
    pub revision: String,
    /// SPDX expression, if the package declares one.
    pub license: Option<String>,
    pub description: Option<String>,
    /// Seconds since the epoch: every mtime and the `created` time.
    pub epoch: u64,
    /// The static binary.
    pub binary_contents: Vec<u8>,
}

/// The image spec for `inputs`.
pub fn image_spec(inputs: &Inputs) -> ImageSpec {
    let binary_path = format!("{BIN_DIR}/{}", inputs.binary);
    let base = rootfs::etc_files();
    let app = vec![File::new(
        &binary_path,
        0o755,
        inputs.binary_contents.clone(),
    )];

    let mut labels = BTreeMap::new();
    let mut label = |key: &str, value: &str| {
        labels.insert(format!("org.opencontainers.image.{key}"), value.to_owned());
    };
    label("title", &inputs.binary);
    label("version", &inputs.version);
    label("revision", &inputs.revision);
    label("source", SOURCE_URL);
    if let Some(license) = &inputs.license {
        label("licenses", license);
    }
    if let Some(description) = &inputs.description {
        label("description", description);
    }

    ImageSpec {
        platform: inputs.platform.clone(),
        layers: vec![base, app],
        user: format!("{NONROOT_ID}:{NONROOT_ID}"),
        entrypoint: vec![binary_path],
        env: vec![format!("PATH={BIN_DIR}:/usr/bin:/bin")],
        working_dir: "/".to_owned(),
        labels,
        epoch: inputs.epoch,
    }
}
