//! The link a WorkerCluster shows: its agents connected or not, health that
//! follows readiness, a manager that refuses to start without its CRD, and a
//! WorkerCluster deleted and registered again.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn worker_clusters_show_their_agents_and_a_killed_agent_shows_disconnected() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (clusters, relay, registrations) = setup().await;
    for worker in clusters.workers() {
        wait_condition(&registrations, &worker.name, "Connected", "True").await;
        wait_condition(&registrations, &worker.name, "Lost", "False").await;
        let wc = registrations.get(&worker.name).await.unwrap();
        let status = wc.status.unwrap();
        assert_eq!(
            status.agent_version.as_deref(),
            Some(env!("CARGO_PKG_VERSION"))
        );
        assert!(status.last_heartbeat_time.is_some(), "{status:?}");
    }

    // `kubectl get wc` reads as the columns promise.
    let kubectl = jobrelay_testbed::go::controlplane::cached()
        .unwrap()
        .path("kubectl");
    let output = std::process::Command::new(kubectl)
        .env("KUBECONFIG", &clusters.manager().kubeconfig)
        .args(["get", "wc"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&output.stdout);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "CONNECTED", "MIRRORS", "LAST-HEARTBEAT", "AGE"],
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(WORKER_A) && l.contains("True")),
        "{table}"
    );

    relay.kill_agent(WORKER_A);
    let shown = wait_condition(&registrations, WORKER_A, "Connected", "False").await;
    println!("killed agent shown Connected=False after {shown:?} (heartbeat interval 1s)");
    assert_eq!(
        condition(&registrations, WORKER_B, "Connected").await,
        "True"
    );

    let sessions = relay.sessions_opened(WORKER_A);
    relay.start_agent(WORKER_A).unwrap();
    relay.wait_sessions(WORKER_A, sessions + 1).await.unwrap();
    wait_condition(&registrations, WORKER_A, "Connected", "True").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn health_follows_readiness_and_every_agent_rejoins_a_restarted_manager() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (clusters, relay, _registrations) = setup().await;
    let agent = relay.agent_health_addr(WORKER_A).unwrap().to_string();
    wait_health(&relay.health_addr, "", ServingStatus::Serving).await;
    wait_health(&relay.health_addr, RELAY, ServingStatus::Serving).await;
    wait_health(&agent, RELAY, ServingStatus::Serving).await;

    let sessions: Vec<usize> = clusters
        .workers()
        .iter()
        .map(|w| relay.sessions_opened(&w.name))
        .collect();
    relay.kill_manager();
    // Without its manager the agent is alive but not ready.
    wait_health(&agent, RELAY, ServingStatus::NotServing).await;
    wait_health(&agent, "", ServingStatus::Serving).await;

    let restarted = Instant::now();
    relay.start_manager().unwrap();
    for (worker, before) in clusters.workers().iter().zip(sessions) {
        relay.wait_sessions(&worker.name, before + 1).await.unwrap();
    }
    println!(
        "all {} agents rejoined the restarted manager within {:?}",
        clusters.workers().len(),
        restarted.elapsed()
    );
    wait_health(&relay.health_addr, RELAY, ServingStatus::Serving).await;
    wait_health(&agent, RELAY, ServingStatus::Serving).await;
}

async fn wait_health(addr: &str, service: &str, expected: ServingStatus) {
    wait::until(
        format!("health of {service:?} at {addr} to be {expected:?}"),
        TIMEOUT,
        || async {
            match serving_status(addr, service).await {
                Ok(status) if status == expected => Seen::Ready(()),
                other => Seen::Waiting(format!("{other:?}")),
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_manager_refuses_to_start_without_the_crd() {
    let clusters = kit::clusters(2);
    let (manager_bin, _) = jobrelay_testbed::relay::binaries::binaries().unwrap();
    // A worker cluster has no WorkerCluster CRD.
    let mut manager = std::process::Command::new(manager_bin);
    manager
        .env("KUBECONFIG", &clusters.workers()[0].kubeconfig)
        .args(["--origin", "e2e-no-crd", "--insecure-plaintext"])
        .args(["--listen", "127.0.0.1:0", "--health-listen", "127.0.0.1:0"])
        .args(["--metrics-listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = jobrelay_testbed::host::processes::spawn(manager).unwrap();
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
