//! An OCI registry and a client that pushes to it, for the install guide's
//! push: the distribution registry and go-containerregistry's `crane`,
//! pinned in `tests/controlplane/registry/go.mod` and built into a cache
//! folder of their own (`registry/<versions>-<digest>/bin`).

use std::path::PathBuf;
use std::time::Instant;

use crate::go::controlplane::{
    Error, STAMP, cache_root, complete, digest, go_build_args, go_command, run, seconds, source_dir,
};

/// The distribution registry's release.
pub const DISTRIBUTION_VERSION: &str = "v3.1.2";
/// go-containerregistry's release (`crane`).
pub const CRANE_VERSION: &str = "v0.22.1";

const PACKAGES: [&str; 2] = [
    "github.com/distribution/distribution/v3/cmd/registry",
    "github.com/google/go-containerregistry/cmd/crane",
];

/// The folder holding `registry` and `crane`, built first when missing.
pub fn ensure_registry_built(log: &mut dyn FnMut(&str)) -> Result<PathBuf, Error> {
    let key = format!(
        "{DISTRIBUTION_VERSION}-crane{CRANE_VERSION}-{}",
        digest(&["registry/go.mod", "registry/go.sum"])?
    );
    let dir = cache_root().join("registry").join(key).join("bin");
    if dir.join(STAMP).is_file() {
        log(&format!(
            "registry {DISTRIBUTION_VERSION} and crane {CRANE_VERSION} cached in {}",
            dir.display()
        ));
        return Ok(dir);
    }
    let partial = dir.with_file_name("bin.partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).map_err(|e| Error::Io(partial.display().to_string(), e))?;
    let args = go_build_args(&format!("{}/", partial.display()), "-s -w", &PACKAGES);
    log(&format!(
        "building the registry and crane (go {})",
        args.join(" ")
    ));
    let started = Instant::now();
    run(go_command(&source_dir().join("registry")).args(&args))?;
    log(&format!(
        "built the registry and crane in {}",
        seconds(started.elapsed())
    ));
    complete(&partial, &dir, DISTRIBUTION_VERSION)?;
    Ok(dir)
}
