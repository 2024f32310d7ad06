//! The helm the tests render and install the chart with, pinned in
//! `tests/controlplane/helm/go.mod` and built into a cache folder of its own
//! (`helm/<version>-<digest>`), so moving helm never rebuilds Kubernetes.

use std::path::PathBuf;
use std::time::Instant;

use crate::go::controlplane::{
    Error, HELM_VERSION, STAMP, cache_root, check_version, complete, digest, go_build_args,
    go_command, kubernetes_minor, run, seconds, source_dir,
};

/// The cached helm binary of the current pin, if it was built before.
pub fn helm() -> Result<PathBuf, Error> {
    let dir = helm_dir()?;
    if dir.join(STAMP).is_file() {
        Ok(dir.join("helm"))
    } else {
        Err(Error::HelmNotBuilt(dir))
    }
}

/// Returns the cached helm binary, building it first when it is missing.
pub fn ensure_helm_built(log: &mut dyn FnMut(&str)) -> Result<PathBuf, Error> {
    if let Ok(helm) = helm() {
        log(&format!("helm {HELM_VERSION} cached in {}", helm.display()));
        return Ok(helm);
    }
    build_helm(log)
}

fn helm_dir() -> Result<PathBuf, Error> {
    let key = format!(
        "{HELM_VERSION}-{}",
        digest(&["helm/go.mod", "helm/go.sum"])?
    );
    Ok(cache_root().join("helm").join(key).join("bin"))
}

fn build_helm(log: &mut dyn FnMut(&str)) -> Result<PathBuf, Error> {
    let dir = helm_dir()?;
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).map_err(|e| Error::Io(partial.display().to_string(), e))?;

    // helm's release build stamps its version, and the Kubernetes version it
    // assumes when no cluster is asked (`.Capabilities.KubeVersion` in
    // `helm template`, deprecation checks in `helm lint`): that of the test
    // clusters.
    let minor = kubernetes_minor();
    let mut ldflags = format!(
        "-s -w -X helm.sh/helm/v3/internal/version.version={HELM_VERSION} -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
    );
    for package in [
        "helm.sh/helm/v3/pkg/lint/rules",
        "helm.sh/helm/v3/pkg/chartutil",
    ] {
        ldflags.push_str(&format!(
            " -X {package}.k8sVersionMajor=1 -X {package}.k8sVersionMinor={minor}"
        ));
    }
    let args = go_build_args(
        &format!("{}/", partial.display()),
        &ldflags,
        &["helm.sh/helm/v3/cmd/helm"],
    );
    log(&format!("building helm (go {})", args.join(" ")));
    let started = Instant::now();
    run(go_command(&source_dir().join("helm")).args(&args))?;
    log(&format!("built helm in {}", seconds(started.elapsed())));

    check_version(&partial, "helm", HELM_VERSION)?;
    complete(&partial, &dir, HELM_VERSION)?;
    log(&format!("helm {HELM_VERSION} cached in {}", dir.display()));
    Ok(dir.join("helm"))
}
