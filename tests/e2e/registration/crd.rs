//! The WorkerCluster resource as the gate of everything: the manager does
//! not start without its CRD, and deleting a WorkerCluster ends its session
//! until it is registered again.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_manager_refuses_to_start_without_the_crd() {
    let clusters = kit::clusters(2);
    let (manager_bin, _) = jobrelay_e2e::binaries::binaries().unwrap();
    // A worker cluster has no WorkerCluster CRD.
    let mut manager = std::process::Command::new(manager_bin);
    manager
        .env("KUBECONFIG", &clusters.workers()[0].kubeconfig)
        .args(["--origin", "e2e-no-crd", "--insecure-plaintext"])
        .args(["--listen", "127.0.0.1:0", "--health-listen", "127.0.0.1:0"])
        .args(["--metrics-listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = jobrelay_e2e::processes::spawn(manager).unwrap();
    let exited = tokio::task::spawn_blocking(move || child.wait_with_output());
    let output = tokio::time::timeout(TIMEOUT, exited)
        .await
        .expect("the manager should exit when the CRD is missing")
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("the WorkerCluster CRD (workerclusters.jobrelay.dev) is not installed"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_a_worker_cluster_ends_its_session_until_it_is_registered_again() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (_clusters, relay, registrations) = setup().await;
    wait_condition(&registrations, WORKER_B, "Connected", "True").await;
    let unknown = refused_count(relay, "unknown_cluster").await;
    registrations
        .delete(WORKER_B, &DeleteParams::default())
        .await
        .unwrap();
    wait_refused(relay, "unknown_cluster", unknown).await;
    assert!(
        relay.agent_log(WORKER_B).contains("PermissionDenied"),
        "the agent logs why it was refused"
    );

    let sessions = relay.sessions_opened(WORKER_B);
    let registration = WorkerCluster::new(WORKER_B, Default::default());
    registrations
        .create(&PostParams::default(), &registration)
        .await
        .unwrap();
    relay.wait_sessions(WORKER_B, sessions + 1).await.unwrap();
    wait_condition(&registrations, WORKER_B, "Connected", "True").await;
}
