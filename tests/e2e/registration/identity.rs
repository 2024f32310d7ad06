//! Who may connect: a session without a valid identity is refused and
//! changes nothing, and an agent's rotated certificate is taken without a
//! restart.

use super::*;

/// Opens a session the way an agent does, with `identity`'s certificate,
/// saying Hello as `cluster`; returns the manager's answer.
async fn hello(
    relay: &Relay,
    identity: Option<&Issued>,
    cluster: &str,
) -> Result<(), tonic::Status> {
    let ca = std::fs::read(relay.ca_path()).expect("read the relay CA");
    let mut endpoint = Endpoint::from_shared(relay.manager_url.clone())
        .expect("manager URL")
        .connect_timeout(Duration::from_secs(5));
    let tls = match identity {
        Some(identity) => jobrelay_process::client::client_config(&Pem {
            cert: identity.cert.clone().into_bytes(),
            key: identity.key.clone().into_bytes(),
            ca,
        }),
        None => tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(ca)),
    };
    endpoint = endpoint.tls_config(tls).expect("TLS configuration");
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("connect: {e:?}")))?;
    let hello = AgentMessage {
        kind: Some(agent_message::Kind::Hello(Hello {
            cluster: cluster.into(),
            agent_version: env!("CARGO_PKG_VERSION").into(),
            inventory: Vec::new(),
            ..Hello::default()
        })),
    };
    let mut stream = RelayClient::new(channel)
        .connect(futures::stream::iter([hello]).chain(futures::stream::pending()))
        .await?
        .into_inner();
    // Accepted: the manager's Welcome arrives.
    stream.message().await?;
    Ok(())
}

/// What is presented, as which cluster, the gRPC status it gets (none when
/// the handshake refuses it), and the reason it is counted under.
type RefusalCase = (
    &'static str,
    Result<Issued, jobrelay_testbed::certs::Error>,
    &'static str,
    Option<Code>,
    &'static str,
);

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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn certificates_are_rotated_without_a_restart() {
    let _exclusive = EXCLUSIVE.lock().await;
    let (_clusters, relay, registrations) = setup().await;
    let (cert, key) = relay.agent_certificate_files(WORKER_A).unwrap();
    let original = (
        std::fs::read_to_string(cert).unwrap(),
        std::fs::read_to_string(key).unwrap(),
    );
    let ca_bundle = std::fs::read_to_string(relay.ca_path()).unwrap();

    // The agent gets a certificate of a CA the manager does not trust yet:
    // it picks the files up, reconnects, and is refused.
    let next_ca = RelayCa::new("next relay CA").unwrap();
    let untrusted = refused_count(relay, "certificate_untrusted").await;
    next_ca
        .client(WORKER_A)
        .unwrap()
        .write(cert.parent().unwrap(), WORKER_A)
        .unwrap();
    wait_refused(relay, "certificate_untrusted", untrusted).await;
    wait_condition(&registrations, WORKER_A, "Connected", "False").await;

    // The manager's CA bundle gains the new CA: the agent gets in.
    let sessions = relay.sessions_opened(WORKER_A);
    jobrelay_testbed::certs::write_atomically(
        relay.ca_path(),
        &format!("{ca_bundle}{}", next_ca.ca_pem),
    )
    .unwrap();
    relay.wait_sessions(WORKER_A, sessions + 1).await.unwrap();
    wait_condition(&registrations, WORKER_A, "Connected", "True").await;

    // Back to the original files.
    let sessions = relay.sessions_opened(WORKER_A);
    jobrelay_testbed::certs::write_atomically(relay.ca_path(), &ca_bundle).unwrap();
    jobrelay_testbed::certs::write_atomically(key, &original.1).unwrap();
    jobrelay_testbed::certs::write_atomically(cert, &original.0).unwrap();
    relay.wait_sessions(WORKER_A, sessions + 1).await.unwrap();
    wait_condition(&registrations, WORKER_A, "Connected", "True").await;
}
