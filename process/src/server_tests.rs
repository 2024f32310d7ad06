//! The acceptor against real TLS clients on loopback: who gets in, who is
//! refused with which reason, and what the limits let through.

use std::time::Duration;

use futures::StreamExt;
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::sync::mpsc;

use super::*;

#[test]
fn a_connection_starts_its_handshake_only_with_a_slot_of_each_kind() {
    assert_eq!(admit_connection(true, true), Ok(()));
    assert_eq!(admit_connection(false, true), Err(CONNECTION_LIMIT));
    assert_eq!(admit_connection(false, false), Err(CONNECTION_LIMIT));
    assert_eq!(admit_connection(true, false), Err(HANDSHAKE_LIMIT));
}

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new() -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A certificate and key (PEM) for `names` with `usages`.
    fn issue(&self, names: &[&str], usages: Vec<ExtendedKeyUsagePurpose>) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.extended_key_usages = usages;
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

fn server_pem(ca: &Ca, client_ca: &str) -> Pem {
    let (cert, key) = ca.issue(&["localhost"], vec![ExtendedKeyUsagePurpose::ServerAuth]);
    Pem {
        cert: cert.into_bytes(),
        key: key.into_bytes(),
        ca: client_ca.as_bytes().to_vec(),
    }
}

/// A listener with `limits` and what it accepted and refused.
async fn listen(
    tls: Arc<ServerTls>,
    limits: ConnectionLimits,
) -> (
    SocketAddr,
    mpsc::UnboundedReceiver<Result<TlsConnection, std::io::Error>>,
    mpsc::UnboundedReceiver<RefusedConnection>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (refused_tx, refused) = mpsc::unbounded_channel();
    let mut incoming = Box::pin(tls.incoming(
        listener,
        limits,
        Arc::new(move |r: &RefusedConnection| {
            let _ = refused_tx.send(r.clone());
        }),
    ));
    let (accepted_tx, accepted) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(connection) = incoming.next().await {
            if accepted_tx.send(connection).is_err() {
                return;
            }
        }
    });
    (addr, accepted, refused)
}

/// Handshakes with the server at `addr` as `(cert, key)`, trusting `ca`.
async fn dial(
    addr: SocketAddr,
    ca: &Ca,
    identity: &(String, String),
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.pem.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(crate::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![CertificateDer::from_pem_slice(identity.0.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(identity.1.as_bytes()).unwrap(),
        )
        .unwrap();
    let tcp = TcpStream::connect(addr).await?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

async fn next<T>(received: &mut mpsc::UnboundedReceiver<T>, what: &str) -> T {
    tokio::time::timeout(Duration::from_secs(10), received.recv())
        .await
        .unwrap_or_else(|_| panic!("waiting for {what}"))
        .unwrap_or_else(|| panic!("{what}: channel closed"))
}

#[tokio::test]
async fn only_client_auth_certificates_of_the_ca_complete_the_handshake() {
    let ca = Ca::new();
    let tls = Arc::new(ServerTls::new(&server_pem(&ca, &ca.pem)).unwrap());
    let (addr, mut accepted, mut refused) = listen(tls, ConnectionLimits::default()).await;

    let agent = ca.issue(&["worker-a"], vec![ExtendedKeyUsagePurpose::ClientAuth]);
    let _kept = dial(addr, &ca, &agent).await.unwrap();
    let connection = next(&mut accepted, "the agent's connection").await.unwrap();
    assert_eq!(connection.peer.dns_names, ["worker-a"]);
    let certificate = connection.peer.certificate.as_ref().expect("its facts");
    assert!(
        certificate.issuer_public_key_sha256.is_some(),
        "the issuer is found in the client CA bundle"
    );

    let other_ca = Ca::new();
    let cases = [
        (
            other_ca.issue(&["worker-a"], vec![ExtendedKeyUsagePurpose::ClientAuth]),
            "certificate_untrusted",
        ),
        (
            ca.issue(&["worker-a"], vec![ExtendedKeyUsagePurpose::ServerAuth]),
            "certificate_without_client_auth",
        ),
        (
            ca.issue(&["worker-a"], vec![]),
            "certificate_without_client_auth",
        ),
        (
            ca.issue(&[], vec![ExtendedKeyUsagePurpose::ClientAuth]),
            "certificate_without_identity",
        ),
    ];
    for (identity, reason) in cases {
        // TLS 1.3: the client is done before the server judges it; the
        // refusal shows on the server's side.
        let _ = dial(addr, &ca, &identity).await;
        assert_eq!(next(&mut refused, reason).await.reason, reason);
    }
    assert!(accepted.try_recv().is_err(), "no refused peer got through");
}

#[tokio::test]
async fn a_reloaded_client_ca_is_used_for_the_next_handshake() {
    let ca = Ca::new();
    let next_ca = Ca::new();
    let tls = Arc::new(ServerTls::new(&server_pem(&ca, &ca.pem)).unwrap());
    let (addr, mut accepted, mut refused) =
        listen(Arc::clone(&tls), ConnectionLimits::default()).await;
    let agent = next_ca.issue(&["worker-a"], vec![ExtendedKeyUsagePurpose::ClientAuth]);

    let _ = dial(addr, &ca, &agent).await;
    assert_eq!(
        next(&mut refused, "the refusal").await.reason,
        "certificate_untrusted"
    );

    tls.reload(&server_pem(&ca, &format!("{}{}", ca.pem, next_ca.pem)))
        .unwrap();
    let _kept = dial(addr, &ca, &agent).await.unwrap();
    let connection = next(&mut accepted, "the connection").await.unwrap();
    assert_eq!(connection.peer.dns_names, ["worker-a"]);
}

#[tokio::test]
async fn connections_beyond_the_limit_are_closed_and_a_silent_handshake_times_out() {
    let ca = Ca::new();
    let tls = Arc::new(ServerTls::new(&server_pem(&ca, &ca.pem)).unwrap());
    let limits = ConnectionLimits {
        max_connections: 2,
        max_handshakes: 1,
        handshake_timeout: Duration::from_millis(500),
    };
    let (addr, mut accepted, mut refused) = listen(tls, limits).await;
    let agent = ca.issue(&["worker-a"], vec![ExtendedKeyUsagePurpose::ClientAuth]);

    // A peer that says nothing holds the one handshake slot until its
    // handshake times out; a second peer meanwhile is closed at once.
    // (Accepted in the order they connected: the silent one first.)
    let _silent = TcpStream::connect(addr).await.unwrap();
    let _ = dial(addr, &ca, &agent).await;
    assert_eq!(
        next(&mut refused, "handshake_limit").await.reason,
        HANDSHAKE_LIMIT
    );
    let timed_out = next(&mut refused, "handshake_timeout").await;
    assert_eq!(timed_out.reason, "handshake_timeout");

    // With the slot free again, two connections are held open; a third is
    // closed at once.
    let _first = dial(addr, &ca, &agent).await.unwrap();
    let one = next(&mut accepted, "the first connection").await.unwrap();
    let _second = dial(addr, &ca, &agent).await.unwrap();
    let _two = next(&mut accepted, "the second connection").await.unwrap();
    let _ = dial(addr, &ca, &agent).await;
    let limited = next(&mut refused, "connection_limit").await;
    assert_eq!(limited.reason, CONNECTION_LIMIT);
    assert!(limited.by_limit());

    // A closed connection frees its slot.
    drop(one);
    let _third = dial(addr, &ca, &agent).await.unwrap();
    let _ = next(&mut accepted, "a connection in the freed slot")
        .await
        .unwrap();
}
