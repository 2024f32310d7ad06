//! A block of `docs/install.md` run as a reader's shell runs it: bash from
//! the checkout's root, the pinned kubectl, helm and crane first on the
//! `PATH`, and the kubeconfig contexts named as the guide names the
//! clusters (`manager`, `worker-a`). A block that fails, or does not print
//! what the guide says it shows, fails the test with the guide's line.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::guide::{Step, missing};
use super::helm::{own_home, run};
use crate::cluster::ClusterInfo;
use crate::go::{controlplane, helm_build, registry_build};

/// The worker's name in the guide, and so its kubeconfig context.
pub const GUIDE_WORKER: &str = "worker-a";

/// Where the guide's blocks run.
pub struct Shell {
    root: PathBuf,
    kubeconfig: String,
}

impl Shell {
    /// A shell on `manager` and `worker`, with a context named as the guide
    /// names the worker (the manager's context is already `manager`);
    /// writes that context into `state`.
    pub fn new(state: &Path, manager: &ClusterInfo, worker: &ClusterInfo) -> Self {
        let alias = state.join("guide-contexts.yaml");
        let text = format!(
            "apiVersion: v1\nkind: Config\ncontexts:\n- name: {GUIDE_WORKER}\n  context: {{cluster: {name}, user: {name}-admin}}\n",
            name = worker.name
        );
        std::fs::write(&alias, text).expect("writing the guide's contexts");
        let kubeconfig = [&manager.kubeconfig, &worker.kubeconfig, &alias]
            .map(|p| p.display().to_string())
            .join(":");
        Shell {
            root: Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
            kubeconfig,
        }
    }

    /// The checkout's root, where the blocks run.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Runs one block with bash and checks what it printed; panics, naming
    /// the guide's line, unless it succeeds and shows what the guide says.
    pub async fn run(&self, step: &Step) {
        let started = Instant::now();
        let mut command = tokio::process::Command::new("bash");
        own_home(&mut command)
            .args(["-euo", "pipefail", "-c", &step.script])
            .current_dir(&self.root)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("PATH", path());
        let ran = run(command, None).await;
        let printed = format!("{}{}", ran.stdout, ran.stderr);
        assert!(
            ran.success,
            "docs/install.md:{} failed:\n{}\n--- it printed:\n{printed}",
            step.line, step.script
        );
        let missing = missing(&printed, &step.see);
        assert!(
            missing.is_empty(),
            "docs/install.md:{}: the guide says it shows {missing:?}; it printed:\n{printed}",
            step.line
        );
        eprintln!(
            "docs/install.md:{}: ran in {:.1} s",
            step.line,
            started.elapsed().as_secs_f64()
        );
    }
}

/// The pinned kubectl, helm and crane first, then the host's tools (bash,
/// openssl, cargo).
fn path() -> String {
    let kubectl = controlplane::cached()
        .expect("the control plane")
        .path("kubectl");
    let helm = helm_build::helm().expect("helm");
    let crane = registry_build::ensure_registry_built(&mut |_| ()).expect("crane");
    let dirs = [kubectl.parent(), helm.parent(), Some(crane.as_path())]
        .into_iter()
        .flatten()
        .map(|d| d.display().to_string());
    dirs.chain(std::env::var("PATH").ok())
        .collect::<Vec<_>>()
        .join(":")
}
