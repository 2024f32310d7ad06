//! The manager's side: a TLS acceptor that verifies the client's
//! certificate inside the handshake ([`crate::client_cert`]), so a peer the
//! CA did not vouch for never sends a byte of gRPC, and that bounds what
//! unauthenticated peers can hold: connections open at once, handshakes in
//! flight, and the time a handshake may take. Every connection it refuses
//! is reported with a reason; every one it accepts carries who the peer is.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;
use tracing::{debug, info, warn};

use crate::Error;
use crate::client_cert::{self, InHandshake};
use crate::files::Pem;
use crate::peer_certificate::{self, PeerCertificate};

/// What one listener lets unauthenticated peers hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once, handshaking or established; beyond it a
    /// new connection is closed as soon as it is accepted.
    pub max_connections: usize,
    /// TLS handshakes in flight at once; beyond it likewise.
    pub max_handshakes: usize,
    /// How long a client may take to finish its handshake.
    pub handshake_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 512,
            max_handshakes: 64,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// A connection closed before it could carry a request, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedConnection {
    pub addr: SocketAddr,
    /// A label for metrics and logs: a [`client_cert::CertificateRefusal`]'s,
    /// or `connection_limit`, `handshake_limit`, `handshake_timeout`,
    /// `tls_handshake_failed`.
    pub reason: &'static str,
    pub detail: String,
}

impl RefusedConnection {
    /// Refused by a limit rather than for what the peer presented.
    pub fn by_limit(&self) -> bool {
        matches!(self.reason, CONNECTION_LIMIT | HANDSHAKE_LIMIT)
    }
}

const CONNECTION_LIMIT: &str = "connection_limit";
const HANDSHAKE_LIMIT: &str = "handshake_limit";

/// Told of every connection refused.
pub type OnRefused = Arc<dyn Fn(&RefusedConnection) + Send + Sync>;

/// Who is at the other end of a connection, as its verified certificate
/// says.
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: SocketAddr,
    /// The DNS names of the certificate's subject alternative names (at
    /// least one: the handshake refuses a certificate without).
    pub dns_names: Vec<String>,
    /// Its expiry and key digests; `None` only if it did not parse.
    pub certificate: Option<PeerCertificate>,
}

/// Whether a just-accepted connection may start its handshake, given
/// whether a connection slot and a handshake slot were free.
pub fn admit_connection(connection_free: bool, handshake_free: bool) -> Result<(), &'static str> {
    match (connection_free, handshake_free) {
        (false, _) => Err(CONNECTION_LIMIT),
        (true, false) => Err(HANDSHAKE_LIMIT),
        (true, true) => Ok(()),
    }
}

/// The reason a handshake that failed with `error` is counted under.
pub fn handshake_refusal(error: &std::io::Error) -> &'static str {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .and_then(client_cert::refusal_of)
        .map_or("tls_handshake_failed", |refusal| refusal.as_str())
}

/// The server's TLS configuration, replaced whole when the files change.
pub struct ServerTls {
    loaded: RwLock<Arc<Loaded>>,
}

/// One set of files, loaded: the configuration handshakes use, and the
/// client CAs a peer's issuer is looked for among.
struct Loaded {
    config: Arc<ServerConfig>,
    client_cas: Vec<rustls_pki_types::CertificateDer<'static>>,
}

impl Loaded {
    fn new(pem: &Pem) -> Result<Self, Error> {
        Ok(Loaded {
            config: Arc::new(load(pem)?),
            client_cas: pem.ca_certificates(),
        })
    }
}

impl ServerTls {
    pub fn new(pem: &Pem) -> Result<Self, Error> {
        Ok(ServerTls {
            loaded: RwLock::new(Arc::new(Loaded::new(pem)?)),
        })
    }

    /// Loads new certificates and a new client CA; connections already open
    /// keep theirs, new handshakes are verified against the new CA.
    pub fn reload(&self, pem: &Pem) -> Result<(), Error> {
        let loaded = Arc::new(Loaded::new(pem)?);
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

    /// Accepts connections on `listener` within `limits`, each handshake in
    /// a task of its own so a slow client holds up no other. `on_refused` is
    /// told of every connection refused.
    pub fn incoming(
        self: Arc<Self>,
        listener: TcpListener,
        limits: ConnectionLimits,
        on_refused: OnRefused,
    ) -> impl Stream<Item = Result<TlsConnection, std::io::Error>> {
        let (accepted, stream) = tokio::sync::mpsc::channel(64);
        let connections = Arc::new(Semaphore::new(limits.max_connections));
        let handshakes = Arc::new(Semaphore::new(limits.max_handshakes));
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
                let connection = Arc::clone(&connections).try_acquire_owned().ok();
                let handshake = Arc::clone(&handshakes).try_acquire_owned().ok();
                let admitted = admit_connection(connection.is_some(), handshake.is_some());
                let (Ok(()), Some(connection), Some(handshake)) = (admitted, connection, handshake)
                else {
                    drop(tcp);
                    on_refused(&RefusedConnection {
                        addr,
                        reason: admitted.err().unwrap_or(HANDSHAKE_LIMIT),
                        detail: "closed as soon as accepted".into(),
                    });
                    continue;
                };
                let loaded = self.current();
                let accepted = accepted.clone();
                let on_refused = Arc::clone(&on_refused);
                tokio::spawn(async move {
                    let _ = tcp.set_nodelay(true);
                    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::clone(&loaded.config));
                    let handshaken =
                        tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await;
                    drop(handshake);
                    let refused = |reason, detail| RefusedConnection {
                        addr,
                        reason,
                        detail,
                    };
                    let stream = match handshaken {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(error)) => {
                            return on_refused(&refused(
                                handshake_refusal(&error),
                                error.to_string(),
                            ));
                        }
                        Err(_) => {
                            return on_refused(&refused(
                                "handshake_timeout",
                                format!("no handshake within {:?}", limits.handshake_timeout),
                            ));
                        }
                    };
                    let chain = stream.get_ref().1.peer_certificates().unwrap_or_default();
                    let dns_names = chain
                        .first()
                        .map(|cert| client_cert::facts(cert).dns_names)
                        .unwrap_or_default();
                    let certificate = peer_certificate::read(chain, &loaded.client_cas);
                    debug!(%addr, ?dns_names, "TLS connection");
                    let peer = Peer {
                        addr,
                        dns_names,
                        certificate,
                    };
                    let _ = accepted
                        .send(Ok(TlsConnection {
                            stream,
                            peer,
                            _slot: connection,
                        }))
                        .await;
                });
            }
        });
        ReceiverStream::new(stream)
    }
}

fn load(pem: &Pem) -> Result<ServerConfig, Error> {
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
        .with_client_cert_verifier(Arc::new(InHandshake(verifier)))
        .with_single_cert(pem.certificates(), pem.private_key()?)
        .map_err(|e| Error::Config(format!("server certificate and key: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// An accepted TLS connection that tells tonic who its peer is: handlers
/// find the [`Peer`] in the request's extensions.
pub struct TlsConnection {
    stream: tokio_rustls::server::TlsStream<TcpStream>,
    peer: Peer,
    /// Its place among the listener's connections, freed when it closes.
    _slot: OwnedSemaphorePermit,
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

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
