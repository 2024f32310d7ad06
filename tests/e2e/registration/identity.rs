//! Connections without a valid identity — no certificate, one of another
//! CA, a cluster name the certificate does not carry — are refused and
//! change nothing.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_without_a_valid_identity_are_refused_and_change_nothing() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (_clusters, relay, registrations) = setup().await;
    let sessions_before = relay.sessions_opened(WORKER_A);

    // A certificate the CA did not vouch for, or not made for a client,
    // fails the TLS handshake itself: the peer never reaches the Relay
    // service, and gets no gRPC status from it.
    let handshake = None;
    let cases: [RefusalCase; 5] = [
        (
            "a certificate naming no registered cluster",
            relay.ca().client("ghost"),
            "ghost",
            Some(Code::PermissionDenied),
            "unknown_cluster",
        ),
        (
            "a certificate from another CA",
            RelayCa::new("another CA").and_then(|ca| ca.client(WORKER_A)),
            WORKER_A,
            handshake,
            "certificate_untrusted",
        ),
        (
            "an expired certificate",
            relay.ca().expired_client(WORKER_A),
            WORKER_A,
            handshake,
            "certificate_expired",
        ),
        (
            "a certificate without the clientAuth usage",
            relay.ca().server_usage_client(WORKER_A),
            WORKER_A,
            handshake,
            "certificate_without_client_auth",
        ),
        (
            "a Hello claiming another cluster than the certificate",
            relay.ca().client(WORKER_B),
            WORKER_A,
            Some(Code::PermissionDenied),
            "cluster_mismatch",
        ),
    ];
    for (what, identity, claimed, code, reason) in cases {
        let counted = refused_count(relay, reason).await;
        let identity = identity.unwrap();
        let refused = hello(relay, Some(&identity), claimed)
            .await
            .expect_err(what);
        match code {
            Some(code) => assert_eq!(refused.code(), code, "{what}: {refused:?}"),
            None => assert!(
                matches!(
                    refused.code(),
                    Code::Cancelled | Code::Unavailable | Code::Unknown
                ),
                "{what}: refused at the handshake, not by the service: {refused:?}"
            ),
        }
        println!(
            "{what}: refused with {:?}: {}",
            refused.code(),
            refused.message()
        );
        wait_refused(relay, reason, counted).await;
        // A refused handshake breaks the client's connection, which its
        // transport may dial again once: each dial is counted.
        if code.is_some() {
            assert_eq!(
                refused_count(relay, reason).await,
                counted + 1.0,
                "{what} is counted once"
            );
        }
        assert!(
            relay
                .manager_log()
                .contains(&format!("reason=\"{reason}\"")),
            "{what} is logged with its reason"
        );
    }

    // No client certificate at all: the handshake itself fails.
    let counted = refused_count(relay, "tls_handshake_failed").await;
    let refused = hello(relay, None, WORKER_A)
        .await
        .expect_err("no certificate");
    println!(
        "no client certificate: {:?}: {}",
        refused.code(),
        refused.message()
    );
    wait_refused(relay, "tls_handshake_failed", counted).await;

    // The real agent of worker-1 kept its session: nothing was replaced.
    assert_eq!(relay.sessions_opened(WORKER_A), sessions_before);
    assert_eq!(
        condition(&registrations, WORKER_A, "Connected").await,
        "True"
    );
    assert!(
        registrations.get_opt("ghost").await.unwrap().is_none(),
        "a refused identity registers nothing"
    );
}
