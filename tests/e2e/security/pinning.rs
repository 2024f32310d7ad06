//! A stolen agent key is cut off without deleting its WorkerCluster: the
//! WorkerCluster pins its agent's public key (`spec.certificate`), so
//! another certificate the same CA issued for the same cluster is refused,
//! and a session whose pin changes under it ends at once. Rotation is the
//! same move the other way: pin the new key, and the agent gets in with it.
//! And no session outlives its certificate.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_manager::clusters::agent_certificates::{CERTIFICATE_ACCEPTED, CERTIFICATE_EXPIRING};
use jobrelay_manager::clusters::worker_cluster::WorkerCluster;
use jobrelay_proto::wire::CLUSTER_KEY;
use jobrelay_testbed::certs::{public_key_sha256, write_atomically};
use jobrelay_testbed::relay::Relay;
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, Patch, PatchParams};

use super::EXCLUSIVE;

/// The worker whose agent's certificate is pinned (the flood's is the other).
const WORKER: &str = "worker-2";

/// Sets `spec.certificate.publicKeySHA256` of [`WORKER`] (none: unpinned).
async fn pin(clusters: &Api<WorkerCluster>, keys: &[&str]) {
    let certificate = match keys {
        [] => serde_json::Value::Null,
        keys => serde_json::json!({"publicKeySHA256": keys}),
    };
    let patch = serde_json::json!({"spec": {"certificate": certificate}});
    clusters
        .patch(WORKER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("pinning WorkerCluster {WORKER}: {e}"));
}

/// Waits until `CertificateAccepted` of [`WORKER`] has `status` and
/// `reason`; returns its message.
async fn accepted(clusters: &Api<WorkerCluster>, status: &str, reason: &str) -> String {
    shows(clusters, CERTIFICATE_ACCEPTED, status, reason).await
}

/// Waits until condition `kind` of [`WORKER`] has `status` and `reason`;
/// returns its message.
async fn shows(clusters: &Api<WorkerCluster>, kind: &str, status: &str, reason: &str) -> String {
    wait::until(
        format!("WorkerCluster {WORKER} {kind}={status} ({reason})"),
        WAIT,
        || async {
            let shown = clusters
                .get(WORKER)
                .await
                .map(|wc| wc.condition(kind).cloned());
            match shown {
                Ok(Some(c)) if c.status == status && c.reason == reason => Seen::Ready(c.message),
                Ok(Some(c)) => Seen::Waiting(format!("{}/{}: {}", c.status, c.reason, c.message)),
                Ok(None) => Seen::Waiting("no such condition".into()),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await
}

/// The manager's count of a session metric with `reason`.
async fn count(relay: &Relay, metric: &str, reason: &str) -> f64 {
    let name = format!("jobrelay_{metric}_total{{reason=\"{reason}\"}}");
    relay.metric(&name).await.ok().flatten().unwrap_or(0.0)
}

/// Waits until the manager counted more than `before` of a session metric.
async fn counted_more(relay: &Relay, metric: &str, reason: &str, before: f64) -> f64 {
    wait::until(
        format!("jobrelay_{metric}_total{{reason=\"{reason}\"}} above {before}"),
        WAIT,
        || async {
            match count(relay, metric, reason).await {
                now if now > before => Seen::Ready(now),
                now => Seen::Waiting(format!("{now}")),
            }
        },
    )
    .await
}

/// Waits until the mirror `name` exists on [`WORKER`].
async fn mirrored(mirrors: &Api<Job>, name: &str) {
    wait::until(
        format!("the mirror of {name} on {WORKER}"),
        WAIT,
        || async {
            match mirrors.get_opt(name).await {
                Ok(Some(_)) => Seen::Ready(()),
                Ok(None) => Seen::Waiting("no mirror yet".into()),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await
}

/// The last line of the agent's log saying why its session ended.
fn agent_saw(relay: &Relay, says: &str) -> String {
    relay
        .agent_log(WORKER)
        .lines()
        .rev()
        .find(|line| line.contains(says))
        .unwrap_or("(not in the agent's log)")
        .to_string()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pinned_certificate_replaced_by_another_valid_one_is_refused_until_the_pin_names_it() {
    let _exclusive = EXCLUSIVE.lock().await;
    let s = Scenario::relayed("pinning").await;
    let relay = s.relay;
    let clusters: Api<WorkerCluster> =
        Api::all(jobrelay_testbed::kit::client(s.clusters.manager()).await);
    let mirrors: Api<Job> = s.worker_api(WORKER).await;
    let (cert_path, key_path) = relay.agent_certificate_files(WORKER).unwrap();
    let (original_cert, original_key) = (read(cert_path), read(key_path));
    let key_a = public_key_sha256(&original_key).unwrap();

    // Pinned to certificate A, which the agent holds: its session stays
    // and a Job is mirrored.
    pin(&clusters, &[&key_a]).await;
    let message = accepted(&clusters, "True", "Pinned").await;
    println!("pinned to A: {CERTIFICATE_ACCEPTED}=True: {message}");
    s.create(s.job("with-a").label(CLUSTER_KEY, WORKER).run_for("1s"))
        .await;
    mirrored(&mirrors, "with-a").await;
    s.wait_condition("with-a", "Complete").await;

    // The agent's files now hold B: the same CA, the same cluster, another
    // key. It reloads them, dials again, and is refused.
    let refused_before = count(relay, "sessions_refused", "certificate_pin_mismatch").await;
    let b = relay.ca().client(WORKER).unwrap();
    let key_b = public_key_sha256(&b.key).unwrap();
    b.write(cert_path.parent().unwrap(), WORKER).unwrap();
    let refused = counted_more(
        relay,
        "sessions_refused",
        "certificate_pin_mismatch",
        refused_before,
    )
    .await;
    let message = accepted(&clusters, "False", "PinMismatch").await;
    println!("B presented: {CERTIFICATE_ACCEPTED}=False: {message}");
    println!("agent: {}", agent_saw(relay, "refused the session"));
    assert!(
        message.contains(&key_b),
        "names the key presented: {message}"
    );

    // A Job for the cluster while B is refused: the agent dials twice more
    // and is refused each time, and nothing is mirrored.
    s.create(s.job("with-b").label(CLUSTER_KEY, WORKER).run_for("1s"))
        .await;
    counted_more(
        relay,
        "sessions_refused",
        "certificate_pin_mismatch",
        refused + 1.0,
    )
    .await;
    assert!(
        mirrors.get_opt("with-b").await.unwrap().is_none(),
        "no mirror while the certificate is refused"
    );

    // The pin rotated to B: the agent gets in with it, and the Job waiting
    // for the cluster is mirrored.
    let sessions = relay.sessions_opened(WORKER);
    pin(&clusters, &[&key_b]).await;
    relay.wait_sessions(WORKER, sessions + 1).await.unwrap();
    accepted(&clusters, "True", "Pinned").await;
    mirrored(&mirrors, "with-b").await;
    s.wait_condition("with-b", "Complete").await;

    // Under the live session with B, the pin goes back to A: the session
    // ends at once, whatever the agent was doing.
    let cut_before = count(relay, "sessions_cut", "certificate_pin_mismatch").await;
    pin(&clusters, &[&key_a]).await;
    counted_more(
        relay,
        "sessions_cut",
        "certificate_pin_mismatch",
        cut_before,
    )
    .await;
    let message = accepted(&clusters, "False", "PinMismatch").await;
    println!("pin changed under B's session: {CERTIFICATE_ACCEPTED}=False: {message}");
    println!(
        "agent: {}",
        agent_saw(relay, "session ended: the client certificate")
    );
    // (Shown as the session's end or as the refusal of the agent's next
    // dial, whichever the status writer saw first.)
    assert!(
        message.contains(&key_b),
        "names the key presented: {message}"
    );

    // As it was: the original files (A, pinned: it gets in), then unpinned.
    let sessions = relay.sessions_opened(WORKER);
    write_atomically(key_path, &original_key).unwrap();
    write_atomically(cert_path, &original_cert).unwrap();
    relay.wait_sessions(WORKER, sessions + 1).await.unwrap();
    accepted(&clusters, "True", "Pinned").await;
    pin(&clusters, &[]).await;
    accepted(&clusters, "True", "NotPinned").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_ends_when_its_certificate_expires_and_the_cluster_shows_it_expiring() {
    let _exclusive = EXCLUSIVE.lock().await;
    let s = Scenario::relayed("expiry").await;
    let relay = s.relay;
    let clusters: Api<WorkerCluster> =
        Api::all(jobrelay_testbed::kit::client(s.clusters.manager()).await);
    let (cert_path, key_path) = relay.agent_certificate_files(WORKER).unwrap();
    let (original_cert, original_key) = (read(cert_path), read(key_path));

    // A certificate valid for 40 more seconds: the agent connects with it,
    // and the cluster shows it expiring, with its date, and the metric.
    let cut_before = count(relay, "sessions_cut", "certificate_expired").await;
    let handshakes_before = count(relay, "sessions_refused", "certificate_expired").await;
    let sessions = relay.sessions_opened(WORKER);
    relay
        .ca()
        .client_expiring_in(WORKER, Duration::from_secs(40))
        .unwrap()
        .write(cert_path.parent().unwrap(), WORKER)
        .unwrap();
    relay.wait_sessions(WORKER, sessions + 1).await.unwrap();
    let message = shows(&clusters, CERTIFICATE_EXPIRING, "True", "ExpiresSoon").await;
    println!("a 40-second certificate: {CERTIFICATE_EXPIRING}=True: {message}");
    let metric =
        format!("jobrelay_agent_certificate_expiry_timestamp_seconds{{cluster=\"{WORKER}\"}}");
    let expires = relay
        .metric(&metric)
        .await
        .unwrap()
        .expect("the expiry metric");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        (0.0..=40.0).contains(&(expires - now)),
        "{metric} is {expires}, {:.0}s from now",
        expires - now
    );

    // At its expiry the session ends, and the agent's next handshake with
    // it is refused.
    counted_more(relay, "sessions_cut", "certificate_expired", cut_before).await;
    let message = accepted(&clusters, "False", "Expired").await;
    println!("at its expiry: {CERTIFICATE_ACCEPTED}=False: {message}");
    println!("agent: {}", agent_saw(relay, "certificate expired"));
    counted_more(
        relay,
        "sessions_refused",
        "certificate_expired",
        handshakes_before,
    )
    .await;

    // Renewed files: back in.
    let sessions = relay.sessions_opened(WORKER);
    write_atomically(key_path, &original_key).unwrap();
    write_atomically(cert_path, &original_cert).unwrap();
    relay.wait_sessions(WORKER, sessions + 1).await.unwrap();
    accepted(&clusters, "True", "NotPinned").await;
    shows(
        &clusters,
        CERTIFICATE_EXPIRING,
        "False",
        "ValidForMoreThanAWeek",
    )
    .await;
}
