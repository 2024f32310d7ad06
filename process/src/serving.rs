//! An HTTPS endpoint whose clients show no certificate (the manager's
//! admission webhook, which the API server calls): the server certificate
//! and its key are read from two files and loaded again when they change,
//! so a rotated Secret is picked up without a restart. Each request is
//! answered by a plain function of its method, path and body.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::server::{ServerConfig, WebPkiClientVerifier, danger::ClientCertVerifier};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{Instrument, debug, info, warn};

use crate::files::{Pem, certificates, private_key, read};
use crate::{Error, Shutdown};

/// The certificate and key files of an HTTPS endpoint, and the flags that
/// named them (for error messages and the expiry metric).
#[derive(Debug, Clone)]
pub struct ServingFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub cert_flag: &'static str,
    pub key_flag: &'static str,
}

impl ServingFiles {
    /// Reads both files (as a [`Pem`] without a CA); an error names the
    /// flag, the file and what is wrong.
    pub fn read(&self) -> Result<Pem, Error> {
        let pem = Pem {
            cert: read(&self.cert, self.cert_flag)?,
            key: read(&self.key, self.key_flag)?,
            ca: Vec::new(),
        };
        let refused = |flag, path: PathBuf| {
            move |message| Error::Pem {
                flag,
                path,
                message,
            }
        };
        certificates(&pem.cert).map_err(refused(self.cert_flag, self.cert.clone()))?;
        private_key(&pem.key).map_err(refused(self.key_flag, self.key.clone()))?;
        crate::metrics::certificate_read(self.cert_flag, &pem.cert);
        Ok(pem)
    }

    /// Checks the files every `every` and publishes them whenever they
    /// changed and read cleanly (see [`crate::PemFiles::watch`]).
    pub fn watch(self, first: Pem, every: Duration) -> tokio::sync::watch::Receiver<Arc<Pem>> {
        crate::files::watch(move || self.read(), first, every)
    }
}

/// The endpoint's TLS configuration, replaced whole when the files change.
pub struct ServingTls {
    config: RwLock<Arc<ServerConfig>>,
    /// Checks the client certificates of clients that show one.
    clients: Option<Arc<dyn ClientCertVerifier>>,
}

impl ServingTls {
    /// Serves `pem` to clients that show no certificate.
    pub fn new(pem: &Pem) -> Result<Self, Error> {
        Ok(ServingTls {
            config: RwLock::new(Arc::new(load(pem, None)?)),
            clients: None,
        })
    }

    /// Serves `pem`; a client may show a certificate, which must then chain
    /// to one of the CAs in `client_cas` (PEM) — a client that shows none
    /// is served too, and the endpoint decides what it may do.
    pub fn verifying_clients(pem: &Pem, client_cas: &[u8]) -> Result<Self, Error> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in crate::files::certificates(client_cas).map_err(Error::Config)? {
            roots
                .add(ca)
                .map_err(|e| Error::Config(format!("client CA: {e}")))?;
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), crate::provider())
                .allow_unauthenticated()
                .build()
                .map_err(|e| Error::Config(format!("client CA: {e}")))?;
        let clients = Some(verifier);
        Ok(ServingTls {
            config: RwLock::new(Arc::new(load(pem, clients.clone())?)),
            clients,
        })
    }

    /// Follows `changes`, loading each new certificate; connections already
    /// open keep theirs.
    pub async fn follow(self: Arc<Self>, mut changes: tokio::sync::watch::Receiver<Arc<Pem>>) {
        while changes.changed().await.is_ok() {
            let pem = Arc::clone(&changes.borrow_and_update());
            match load(&pem, self.clients.clone()) {
                Ok(config) => {
                    *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config);
                    info!(fingerprint = %pem.fingerprint(), "serving certificate reloaded");
                }
                Err(error) => {
                    warn!(%error, "new serving certificate refused; keeping the one loaded")
                }
            }
        }
    }

    fn current(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.config.read().unwrap_or_else(|p| p.into_inner()))
    }
}

fn load(pem: &Pem, clients: Option<Arc<dyn ClientCertVerifier>>) -> Result<ServerConfig, Error> {
    let builder = ServerConfig::builder_with_provider(crate::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(e.to_string()))?;
    let builder = match clients {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(pem.certificates(), pem.private_key()?)
        .map_err(|e| Error::Config(format!("serving certificate and key: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Answers one request: its method, path and body (at most
/// [`MAX_BODY`] bytes).
pub type Respond = Arc<dyn Fn(&hyper::Method, &str, Bytes) -> Response<Full<Bytes>> + Send + Sync>;

/// The largest request body read: an AdmissionReview holds the object and,
/// on an update, its old copy — each at most what the API server stores
/// (1.5 MiB) — and a few fields more.
pub const MAX_BODY: usize = 3 * 1024 * 1024 + 256 * 1024;
/// Connections open at once; beyond it a new one is closed at once.
const MAX_CONNECTIONS: usize = 256;
/// Request bodies read at once: what the endpoint holds of its clients'
/// bodies at most is this many times [`MAX_BODY`]; other requests wait.
const READING: usize = 8;
/// How long a client may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send a request's headers, and then its
/// body: the API server gives a webhook at most 30 s, so a request slower
/// than this is no API server's.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves HTTPS on `listener` with `tls`, answering each request with
/// `respond`, until the shutdown; ends early only if the listener fails.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<ServingTls>,
    respond: Respond,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    let reading = Arc::new(Semaphore::new(READING));
    let connection = move |stream: Tls| {
        let (respond, reading) = (Arc::clone(&respond), Arc::clone(&reading));
        let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
            let (respond, reading) = (Arc::clone(&respond), Arc::clone(&reading));
            async move {
                let answered = answer(request, respond, &reading, REQUEST_TIMEOUT).await;
                Ok::<_, std::convert::Infallible>(answered)
            }
        });
        http1(stream, service)
    };
    accept(listener, tls, shutdown, connection).await
}

/// A client's TLS connection.
pub type Tls = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;

/// The common name of the certificate the client of `stream` showed (the
/// handshake verified its chain), if it showed one.
pub fn client_common_name(stream: &Tls) -> Option<String> {
    crate::peer_certificate::common_name(stream.get_ref().1.peer_certificates()?)
}

/// Accepts connections on `listener` with `tls` until the shutdown — at
/// most [`MAX_CONNECTIONS`] open at once, each with [`HANDSHAKE_TIMEOUT`]
/// for its handshake — and runs `connection` on each in a task of its own.
pub async fn accept<C, F>(
    listener: TcpListener,
    tls: Arc<ServingTls>,
    shutdown: Shutdown,
    connection: C,
) -> std::io::Result<()>
where
    C: Fn(Tls) -> F + Send + Sync + 'static,
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let open = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let connection = Arc::new(connection);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => accepted?,
            () = shutdown.clone().requested() => return Ok(()),
        };
        let Ok(slot) = Arc::clone(&open).try_acquire_owned() else {
            warn!(%peer, "too many connections open; closed");
            continue;
        };
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
        let connection = Arc::clone(&connection);
        tokio::spawn(
            async move {
                let _slot = slot;
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => connection(stream).await,
                    Ok(Err(error)) => debug!(%error, "TLS handshake failed"),
                    Err(_) => debug!("no TLS handshake within {HANDSHAKE_TIMEOUT:?}"),
                }
            }
            .instrument(tracing::debug_span!("https_connection", %peer)),
        );
    }
}

/// Serves HTTP/1.1 on `stream` with `service` until the connection ends;
/// a client has [`REQUEST_TIMEOUT`] to send a request's headers.
pub async fn http1<S, B>(stream: Tls, service: S)
where
    S: hyper::service::Service<Request<hyper::body::Incoming>, Response = Response<B>>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if let Err(error) = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(REQUEST_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service)
        .await
    {
        debug!(%error, "HTTPS connection ended");
    }
}

/// Reads the body of `request` — within [`MAX_BODY`], within `within`,
/// and only while one of the `reading` places is free — and answers it.
async fn answer<B>(
    request: Request<B>,
    respond: Respond,
    reading: &Semaphore,
    within: Duration,
) -> Response<Full<Bytes>>
where
    B: hyper::body::Body,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let (parts, body) = request.into_parts();
    let read = async {
        let _place = reading.acquire().await;
        Limited::new(body, MAX_BODY).collect().await
    };
    match tokio::time::timeout(within, read).await {
        Ok(Ok(body)) => respond(&parts.method, parts.uri.path(), body.to_bytes()),
        Ok(Err(error)) => refuse(
            StatusCode::BAD_REQUEST,
            format!("cannot read the request body (at most {MAX_BODY} bytes): {error}"),
        ),
        Err(_) => refuse(
            StatusCode::REQUEST_TIMEOUT,
            format!("the request body did not arrive within {within:?}"),
        ),
    }
}

fn refuse(status: StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(format!("{text}\n"))));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo() -> Respond {
        Arc::new(|_method: &hyper::Method, _path: &str, body: Bytes| Response::new(Full::new(body)))
    }

    fn post<B>(body: B) -> Request<B> {
        Request::post("/review").body(body).expect("a request")
    }

    #[tokio::test]
    async fn a_body_past_an_admission_reviews_size_is_refused_and_one_within_answered() {
        let reading = Semaphore::new(READING);
        let within = Duration::from_secs(10);
        let fits = Full::new(Bytes::from(vec![b'x'; MAX_BODY]));
        let answered = answer(post(fits), echo(), &reading, within).await;
        assert_eq!(answered.status(), StatusCode::OK);
        let too_large = Full::new(Bytes::from(vec![b'x'; MAX_BODY + 1]));
        let refused = answer(post(too_large), echo(), &reading, within).await;
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_does_not_arrive_in_time_is_refused_and_frees_its_place() {
        let reading = Semaphore::new(1);
        let never = http_body_util::StreamBody::new(futures::stream::pending::<
            Result<hyper::body::Frame<Bytes>, std::io::Error>,
        >());
        let within = Duration::from_secs(10);
        let refused = answer(post(never), echo(), &reading, within).await;
        assert_eq!(refused.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(reading.available_permits(), 1, "its place is free again");
    }

    #[test]
    fn a_key_that_is_not_pem_is_refused_naming_its_flag() {
        let dir = std::env::temp_dir().join(format!("jobrelay-serving-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a folder");
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = rcgen::CertificateParams::new(vec!["webhook.jobrelay.svc".into()])
            .expect("params")
            .self_signed(&key)
            .expect("a certificate");
        let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert_path, cert.pem()).expect("written");
        std::fs::write(&key_path, "not a key").expect("written");
        let files = ServingFiles {
            cert: cert_path,
            key: key_path.clone(),
            cert_flag: "--webhook-tls-cert",
            key_flag: "--webhook-tls-key",
        };
        let error = files.read().expect_err("no key").to_string();
        assert!(error.starts_with("--webhook-tls-key "), "{error}");
        std::fs::write(&key_path, key.serialize_pem()).expect("written");
        let pem = files.read().expect("both read");
        assert!(ServingTls::new(&pem).is_ok());
        std::fs::remove_dir_all(&dir).expect("removed");
    }
}
