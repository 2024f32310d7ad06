//! The manager's side: a TLS acceptor that demands a client certificate and
//! attaches to every connection who the peer is. The certificate chain is
//! checked right after the handshake rather than inside it, so a refused
//! agent gets a gRPC status that says why (expired, untrusted) instead of a
//! bare TLS alert; no request is served on such a connection.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;
use tracing::{debug, info, warn};

use crate::Error;
use crate::files::Pem;

/// How long a client may take to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Told the peer's address and the error of every handshake that failed.
pub type FailedHandshake = Arc<dyn Fn(SocketAddr, &str) + Send + Sync>;

/// Who is at the other end of a connection, as its certificate says.
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    pub identity: PeerIdentity,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerIdentity {
    /// A certificate that chains to the CA; the DNS names of its SAN.
    Verified(Vec<String>),
    /// A certificate that does not.
    Refused(CertificateRefusal, String),
}

/// Why a client certificate was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertificateRefusal {
    Expired,
    NotYetValid,
    /// Not signed by the configured CA, or otherwise invalid.
    Untrusted,
    /// Valid, but names no DNS subject alternative name.
    NoIdentity,
}

impl CertificateRefusal {
    /// A label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            CertificateRefusal::Expired => "certificate_expired",
            CertificateRefusal::NotYetValid => "certificate_not_yet_valid",
            CertificateRefusal::Untrusted => "certificate_untrusted",
            CertificateRefusal::NoIdentity => "certificate_without_identity",
        }
    }
}

struct Loaded {
    config: Arc<ServerConfig>,
    verifier: Arc<dyn ClientCertVerifier>,
}

/// The server's TLS configuration, replaced whole when the files change.
pub struct ServerTls {
    loaded: RwLock<Arc<Loaded>>,
}

impl ServerTls {
    pub fn new(pem: &Pem) -> Result<Self, Error> {
        Ok(ServerTls {
            loaded: RwLock::new(Arc::new(load(pem)?)),
        })
    }

    /// Loads new certificates; connections already open keep theirs.
    pub fn reload(&self, pem: &Pem) -> Result<(), Error> {
        let loaded = Arc::new(load(pem)?);
        *self.loaded.write().unwrap_or_else(|p| p.into_inner()) = loaded;
        Ok(())
    }

    /// Follows `changes`, loading each new set of files.
    pub async fn follow(self: Arc<Self>, mut changes: tokio::sync::watch::Receiver<Arc<Pem>>) {
        while changes.changed().await.is_ok() {
            let pem = Arc::clone(&changes.borrow_and_update());
            match self.reload(&pem) {
                Ok(()) => info!(fingerprint = %pem.fingerprint(), "server certificates reloaded"),
                Err(error) => warn!(%error, "new certificates refused; keeping the ones loaded"),
            }
        }
    }

    fn current(&self) -> Arc<Loaded> {
        Arc::clone(&self.loaded.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Accepts connections on `listener`, each handshake in a task of its
    /// own so a slow client holds up no other. `on_failed_handshake` is
    /// called with the error of every handshake that failed.
    pub fn incoming(
        self: Arc<Self>,
        listener: TcpListener,
        on_failed_handshake: FailedHandshake,
    ) -> impl Stream<Item = Result<TlsConnection, std::io::Error>> {
        let (accepted, stream) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (tcp, addr) = match listener.accept().await {
                    Ok(pair) => pair,
                    Err(error) => {
                        warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                if accepted.is_closed() {
                    return;
                }
                let loaded = self.current();
                let accepted = accepted.clone();
                let on_failed = Arc::clone(&on_failed_handshake);
                tokio::spawn(async move {
                    let _ = tcp.set_nodelay(true);
                    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::clone(&loaded.config));
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let identity = identify(
                                loaded.verifier.as_ref(),
                                stream.get_ref().1.peer_certificates(),
                            );
                            debug!(%addr, ?identity, "TLS connection");
                            let _ = accepted
                                .send(Ok(TlsConnection {
                                    stream,
                                    peer: Peer { addr, identity },
                                }))
                                .await;
                        }
                        Ok(Err(error)) => on_failed(addr, &error.to_string()),
                        Err(_) => on_failed(addr, "handshake timed out"),
                    }
                });
            }
        });
        ReceiverStream::new(stream)
    }
}

fn load(pem: &Pem) -> Result<Loaded, Error> {
    let provider = crate::provider();
    let mut roots = rustls::RootCertStore::empty();
    for ca in pem.ca_certificates() {
        roots
            .add(ca)
            .map_err(|e| Error::Config(format!("CA certificate refused: {e}")))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| Error::Config(format!("client verifier: {e}")))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(e.to_string()))?
        .with_client_cert_verifier(Arc::new(AfterHandshake(Arc::clone(&verifier))))
        .with_single_cert(pem.certificates(), pem.private_key()?)
        .map_err(|e| Error::Config(format!("server certificate and key: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Loaded {
        config: Arc::new(config),
        verifier,
    })
}

/// Checks a presented chain against the CA and reads the identity from it.
fn identify(
    verifier: &dyn ClientCertVerifier,
    chain: Option<&[CertificateDer<'_>]>,
) -> PeerIdentity {
    let Some((end_entity, intermediates)) = chain.and_then(|c| c.split_first()) else {
        // The handshake makes a certificate mandatory; this is defensive.
        return PeerIdentity::Refused(
            CertificateRefusal::Untrusted,
            "no client certificate".into(),
        );
    };
    if let Err(error) = verifier.verify_client_cert(end_entity, intermediates, UnixTime::now()) {
        let refusal = match &error {
            rustls::Error::InvalidCertificate(
                CertificateError::Expired | CertificateError::ExpiredContext { .. },
            ) => CertificateRefusal::Expired,
            rustls::Error::InvalidCertificate(
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. },
            ) => CertificateRefusal::NotYetValid,
            _ => CertificateRefusal::Untrusted,
        };
        return PeerIdentity::Refused(refusal, error.to_string());
    }
    let names = dns_names(end_entity);
    if names.is_empty() {
        return PeerIdentity::Refused(
            CertificateRefusal::NoIdentity,
            "the client certificate has no DNS subject alternative name".into(),
        );
    }
    PeerIdentity::Verified(names)
}

/// The DNS names in a certificate's subject alternative names.
fn dns_names(cert: &CertificateDer<'_>) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert.as_ref()) else {
        return Vec::new();
    };
    let Ok(Some(san)) = parsed.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some(dns.to_string()),
            _ => None,
        })
        .collect()
}

/// Demands a client certificate and proof of its key during the handshake;
/// whether the chain is trusted is decided right after it ([`identify`]).
#[derive(Debug)]
struct AfterHandshake(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for AfterHandshake {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// An accepted TLS connection that tells tonic who its peer is: handlers
/// find the [`Peer`] in the request's extensions.
pub struct TlsConnection {
    stream: tokio_rustls::server::TlsStream<TcpStream>,
    peer: Peer,
}

impl Connected for TlsConnection {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

impl AsyncRead for TlsConnection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
