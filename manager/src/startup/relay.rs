//! The `jobrelay.v1.Relay` service agents dial: HTTP/2 keepalives at the
//! heartbeat interval, the session limits, and — with TLS — the handshake
//! checks and connection limits of [`ServerTls`], its certificate followed
//! on disk.

use std::sync::Arc;

use jobrelay_process::{PemFiles, RefusedConnection, ServerTls, Shutdown, Tasks};
use jobrelay_proto::v1::relay_server::RelayServer;
use tokio::task::JoinHandle;
use tracing::info;

use crate::Error;
use crate::cli::Args;
use crate::session::{self, RelayService, Sessions};
use crate::telemetry::metrics::Metrics;

pub(super) type Served = JoinHandle<Result<(), tonic::transport::Error>>;

/// Listens on `--listen` and serves the Relay until shutdown.
pub(super) async fn serve(
    args: &Args,
    tls: Option<PemFiles>,
    sessions: Arc<Sessions>,
    metrics: &Arc<Metrics>,
    shutdown: &Shutdown,
    tasks: &Tasks,
) -> Result<Served, Error> {
    let relay = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(args.heartbeat_interval))
        .http2_keepalive_timeout(Some(args.heartbeat_interval * 2))
        .max_concurrent_streams(Some(session::limits::MAX_CONCURRENT_STREAMS))
        .http2_max_header_list_size(Some(session::limits::MAX_HEADER_LIST_SIZE))
        .add_service(
            RelayServer::new(RelayService { sessions })
                .max_decoding_message_size(session::limits::HELLO_LIMIT),
        );
    let listener = tokio::net::TcpListener::bind(args.listen).await.map_err(
        jobrelay_process::Error::listen("the Relay service", args.listen),
    )?;
    info!(listen = %args.listen, tls = tls.is_some(), "serving jobrelay.v1.Relay");
    let stopped = shutdown.clone().requested();
    let Some(files) = tls else {
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        return Ok(tasks.spawn_to_end(relay.serve_with_incoming_shutdown(incoming, stopped)));
    };
    let pem = files.read()?;
    let server_tls = Arc::new(ServerTls::new(&pem)?);
    tasks.spawn(
        Arc::clone(&server_tls)
            .follow(files.watch(pem, args.process.certificates.certificate_reload_interval)),
    );
    let refused = Arc::clone(metrics);
    let incoming = server_tls.incoming(
        listener,
        args.relay.connection_limits(),
        Arc::new(move |connection: &RefusedConnection| {
            session::log_refused_connection(connection);
            refused.refused(connection.reason);
        }),
    );
    Ok(tasks.spawn_to_end(relay.serve_with_incoming_shutdown(incoming, stopped)))
}
