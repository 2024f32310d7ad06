//! `docs/install.md`, run as written: every block it marks as a command a
//! user runs, in order, through bash, on a manager and a worker with real
//! nodes and cert-manager (both clusters' own, from the pinned release),
//! each block failing the test if it fails or if what the guide says it
//! prints does not appear. The guide builds the images, pushes them to a
//! registry on loopback, and the nodes' containerd pulls them from there.
//! The test gives only what the guide declares as placeholders (the
//! registry, the address agents dial) and the values files the guide leaves
//! to the reader's clusters (`local/<cluster>.yaml`: where Pods run, the
//! host's network, the API server's address); the kubeconfig contexts are
//! the guide's names. Blocks the guide says a test cannot run are listed on
//! the test's output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jobrelay_testbed::cluster::ClusterInfo;
use jobrelay_testbed::controllers::certmanager::CertManager;
use jobrelay_testbed::deploy::registry::Registry;
use jobrelay_testbed::deploy::shell::{GUIDE_WORKER, Shell};
use jobrelay_testbed::deploy::{self, guide};
use jobrelay_testbed::host::ports::free_port;
use jobrelay_testbed::kit::{self, ClusterOptions};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_install_guide_runs_as_written() {
    let clusters = kit::clusters_with(ClusterOptions {
        workers: 1,
        real_nodes: ["manager", "worker-1"].map(String::from).to_vec(),
    });
    let (manager, worker) = (clusters.manager(), &clusters.workers()[0]);
    let state = &clusters.set().state_dir;
    let _cert_managers = (
        CertManager::start(manager, state)
            .await
            .expect("cert-manager on the manager"),
        CertManager::start(worker, state)
            .await
            .expect("cert-manager on the worker"),
    );
    let registry = Registry::start(&state.join("registry"))
        .await
        .expect("the registry");

    let shell = Shell::new(state, manager, worker);
    let local = fresh_local(shell.root());
    let relay_port = free_port().expect("a port");
    write_values(
        &local.join("manager.yaml"),
        &manager_values(manager, relay_port),
    );
    write_values(
        &local.join(format!("{GUIDE_WORKER}.yaml")),
        &agent_values(worker),
    );

    let text =
        std::fs::read_to_string(shell.root().join("docs/install.md")).expect("docs/install.md");
    let read = guide::parse(&text).unwrap_or_else(|e| panic!("docs/install.md: {e}"));
    // The manager listens on every address of the host's network, so the
    // agents dial it on loopback, by a name its certificate can hold.
    let given: BTreeMap<String, String> = [
        ("registry.example.com", registry.address.clone()),
        (
            "jobrelay.example.com:8443",
            format!("localhost:{relay_port}"),
        ),
        ("jobrelay.example.com", "localhost".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let steps = guide::substitute(&read, &given).unwrap_or_else(|e| panic!("docs/install.md: {e}"));
    for (line, why) in &read.not_run {
        eprintln!("docs/install.md:{line}: not run: {why}");
    }
    for step in steps.iter().filter(|s| s.name.is_some()) {
        eprintln!(
            "docs/install.md:{}: `{}`, run by the deploy_upgrade target",
            step.line,
            step.name.as_deref().unwrap_or_default()
        );
    }
    for step in guide::install(&steps) {
        shell.run(step).await;
    }
}

/// The guide's `local/`, emptied: only if a run of this test wrote it (a
/// reader's own keys there are never touched).
fn fresh_local(root: &Path) -> PathBuf {
    const MARK: &str = ".written-by-deploy-guide";
    let local = root.join("local");
    if local.exists() {
        assert!(
            local.join(MARK).is_file(),
            "{} holds files this test did not write (keys of an install?); move them away to run it",
            local.display()
        );
        std::fs::remove_dir_all(&local).expect("emptying local/");
    }
    std::fs::create_dir_all(&local).expect("local/");
    std::fs::write(local.join(MARK), "").expect("marking local/");
    local
}

fn write_values(path: &Path, values: &Value) {
    // JSON is YAML.
    std::fs::write(path, values.to_string())
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// What a cluster with real nodes on one host needs: the Pods on the real
/// node, on the host's network, reaching their API server on loopback.
fn on_the_real_node(cluster: &ClusterInfo) -> (Value, Value, Value) {
    let port = deploy::api_port(cluster).expect("the API server's port");
    let (selector, tolerations) = deploy::on_real_node();
    (
        selector,
        tolerations,
        json!({"k8sServiceHost": "127.0.0.1", "k8sServicePort": port}),
    )
}

/// One replica (one real node), listening on every address of the host so
/// that loopback reaches it, on ports of its own.
fn manager_values(cluster: &ClusterInfo, relay_port: u16) -> Value {
    let (selector, tolerations, mut values) = on_the_real_node(cluster);
    let port = || free_port().expect("a port");
    values["manager"] = json!({
        "replicas": 1,
        "hostNetwork": true,
        "listenOnPodIP": false,
        "nodeSelector": selector,
        "tolerations": tolerations,
        "ports": {"relay": relay_port, "health": port(), "metrics": port()},
        "webhook": {"port": port()},
        "visibility": {"port": port()},
    });
    values
}

fn agent_values(cluster: &ClusterInfo) -> Value {
    let (selector, tolerations, mut values) = on_the_real_node(cluster);
    let port = || free_port().expect("a port");
    values["agent"] = json!({
        "hostNetwork": true,
        "nodeSelector": selector,
        "tolerations": tolerations,
        "ports": {"health": port(), "metrics": port()},
    });
    values
}
