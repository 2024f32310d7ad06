//! Why a jobrelay process cannot get going: its certificates, its
//! Kubernetes client, or a listener — each naming the flag or address.

use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{flag} {}: {source}", path.display())]
    Read {
        flag: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{flag} {}: {message}", path.display())]
    Pem {
        flag: &'static str,
        path: PathBuf,
        message: String,
    },
    #[error("TLS configuration: {0}")]
    Config(String),
    #[error("--kube-api-qps (JOBRELAY_KUBE_API_QPS) must be a number of at least 0, not {0}")]
    Qps(f64),
    #[error(
        "--kube-api-burst (JOBRELAY_KUBE_API_BURST) must be at least 1 while --kube-api-qps is above 0 (it is {qps})"
    )]
    Burst { qps: f64 },
    #[error("the user agent {0:?} is not a valid HTTP header value (printable ASCII only)")]
    UserAgent(String),
    #[error("cannot find the Kubernetes API server: {0}")]
    InferConfig(#[from] kube::config::InferConfigError),
    #[error("cannot build the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
    #[error("{what} cannot listen on {addr}: {source}")]
    Listen {
        what: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// A listener error, naming what could not listen and where.
    pub fn listen(what: &'static str, addr: SocketAddr) -> impl FnOnce(std::io::Error) -> Error {
        move |source| Error::Listen { what, addr, source }
    }
}
