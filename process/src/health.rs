//! The plaintext `grpc.health.v1.Health` endpoint that Kubernetes `grpc:`
//! probes call (they speak no TLS). Service "" is SERVING while the process
//! runs — for liveness; [`RELAY`] is SERVING only while the process can do
//! its work — for readiness.

use std::net::SocketAddr;

use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use tracing::info;

/// The health service name readiness probes ask for.
pub const RELAY: &str = "jobrelay.v1.Relay";

/// Says whether [`RELAY`] is ready.
#[derive(Clone)]
pub struct Readiness {
    reporter: HealthReporter,
}

impl Readiness {
    pub async fn set(&self, ready: bool) {
        let status = if ready {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        self.reporter.set_service_status(RELAY, status).await;
    }
}

/// Binds `addr` and serves health there, in a task of its own, until the
/// shutdown; [`RELAY`] starts NOT_SERVING.
pub async fn serve(
    addr: SocketAddr,
    shutdown: crate::Shutdown,
) -> Result<
    (
        Readiness,
        tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    ),
    crate::Error,
> {
    let (reporter, service) = tonic_health::server::health_reporter();
    let readiness = Readiness { reporter };
    readiness.set(false).await;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(crate::Error::listen("the health endpoint", addr))?;
    info!(listen = %addr, "serving grpc.health.v1.Health");
    let server = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            shutdown.requested(),
        );
    Ok((readiness, tokio::spawn(server)))
}
