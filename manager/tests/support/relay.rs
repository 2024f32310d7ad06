//! The `jobrelay.v1.Relay` service in one process, over `tokio::io::duplex`
//! (no ports, no cluster), for the service's tests: a manager with one
//! registered cluster (w1) holding one Job, and an agent's side of a session.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use jobrelay_manager::clusters::agent_certificates::AgentCertificates;
use jobrelay_manager::clusters::registry::Registry;
use jobrelay_manager::clusters::worker_cluster::{WorkerCluster, WorkerClusterSpec};
use jobrelay_manager::deletion_turns::DeletionTurns;
use jobrelay_manager::fleet::Fleet;
use jobrelay_manager::kinds::Key;
use jobrelay_manager::kinds::stores::Stores;
use jobrelay_manager::session::{RelayService, SessionLimits, Sessions};
use jobrelay_manager::telemetry::events::{Events, JobEvents};
use jobrelay_manager::telemetry::metrics::Metrics;
use jobrelay_proto::v1::relay_client::RelayClient;
use jobrelay_proto::v1::relay_server::RelayServer;
use jobrelay_proto::v1::{
    AgentMessage, Hello, InventoryEntry, ManagerMessage, agent_message, manager_message,
};
use jobrelay_proto::wire::{CLUSTER_KEY, MANAGED_BY, REMOTE_CLEANUP_FINALIZER};
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, UnboundedReceiverStream};
use tonic::transport::{Channel, Endpoint, Server, Uri};

pub const ORIGIN: &str = "hub";
/// The manager instance of the Relay under test.
pub const INSTANCE: &str = "hub-instance";
pub const UID: &str = "u1";
/// Long enough that no heartbeat interleaves with what a test waits for.
pub const HEARTBEAT: Duration = Duration::from_secs(3600);

/// The manager's side: the service served over in-memory pipes, and the
/// fleet it feeds.
pub struct Manager {
    pub fleet: Arc<Fleet>,
    pub metrics: Arc<Metrics>,
    pub triggers: mpsc::UnboundedReceiver<Key>,
    pub channel: Channel,
    /// The WorkerClusters the sessions read, and the mark they watch.
    clusters: std::sync::Mutex<reflector::store::Writer<WorkerCluster>>,
    cluster_changes: tokio::sync::watch::Sender<()>,
    /// StatusText, so the sessions never see a shutdown.
    _shutdown: jobrelay_process::shutdown::Trigger,
}

pub fn key() -> Key {
    Key::of(&ObjectRef::<Job>::new("train").within("ml"))
}

/// A manager Job held on cluster w1.
pub fn held_job() -> Job {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "train", "namespace": "ml", "uid": UID, "generation": 1,
            "annotations": {CLUSTER_KEY: "w1"}, "finalizers": [REMOTE_CLEANUP_FINALIZER]},
        "spec": {"managedBy": MANAGED_BY, "template": {"spec": {"containers": []}}},
    }))
    .unwrap()
}

/// A client whose every request is answered 404: the Events a session
/// records go nowhere, which the service logs and survives.
fn unreachable_api() -> kube::Client {
    let service = tower::service_fn(|_request| async {
        let response = http::Response::builder()
            .status(404)
            .body(Full::new(Bytes::from_static(b"{}")))
            .expect("static response");
        Ok::<_, std::convert::Infallible>(response)
    });
    kube::Client::new(service, "default")
}

pub async fn manager() -> Manager {
    manager_with(SessionLimits::default()).await
}

/// A manager whose sessions have `limits`.
pub async fn manager_with(limits: SessionLimits) -> Manager {
    let (tx, triggers) = mpsc::unbounded_channel();
    let fleet = Arc::new(Fleet::new(tx));
    let (clusters, mut cluster_writer) = reflector::store::<WorkerCluster>();
    cluster_writer.apply_watcher_event(&watcher::Event::Apply(WorkerCluster::new(
        "w1",
        WorkerClusterSpec::default(),
    )));
    let (cluster_changes, clusters_changed) = tokio::sync::watch::channel(());
    let (namespaces, _namespace_writer) = reflector::store();
    let (jobs, mut job_writer) = reflector::store::<Job>();
    job_writer.apply_watcher_event(&watcher::Event::Apply(held_job()));
    let (_synced_tx, synced) = tokio::sync::watch::channel(true);
    let metrics = Arc::new(Metrics::new(
        Arc::clone(&fleet),
        Arc::new(DeletionTurns::per_second(1.0)),
        false,
    ));
    let (shutdown_trigger, shutdown) = jobrelay_process::Shutdown::new();
    let sessions = Arc::new(Sessions {
        registry: Registry {
            clusters,
            namespaces,
        },
        tls: false,
        metrics: Arc::clone(&metrics),
        fleet: Arc::clone(&fleet),
        stores: Stores {
            jobs,
            jobsets: None,
        },
        synced,
        events: Events::new(unreachable_api(), ORIGIN, JobEvents::Steps),
        origin: ORIGIN.into(),
        instance: INSTANCE.into(),
        heartbeat_interval: HEARTBEAT,
        remote_retention: Duration::ZERO,
        limits,
        shutdown,
        fence: jobrelay_process::Fence::open(),
        epoch: tokio::sync::watch::channel(jobrelay_manager::leader::Epoch::default()).1,
        certificates: Arc::new(AgentCertificates::new(metrics.agent_certificate_expiry())),
        clusters_changed,
        wanted: Default::default(),
        hello_reads: tokio::sync::Semaphore::new(
            jobrelay_manager::session::limits::HELLO_READS_AT_ONCE,
        ),
        logs: Arc::default(),
    });

    // Every connection the client makes is a fresh pipe handed to the server.
    let (pipes, incoming) = mpsc::channel::<tokio::io::DuplexStream>(4);
    tokio::spawn(
        Server::builder()
            .add_service(
                RelayServer::new(RelayService { sessions })
                    .max_decoding_message_size(jobrelay_manager::session::limits::HELLO_LIMIT),
            )
            .serve_with_incoming(tokio_stream::StreamExt::map(
                ReceiverStream::new(incoming),
                Ok::<_, std::io::Error>,
            )),
    );
    let channel = Endpoint::from_static("http://relay.test").connect_with_connector_lazy(
        tower::service_fn(move |_: Uri| {
            let pipes = pipes.clone();
            async move {
                let (client, server) = tokio::io::duplex(1 << 20);
                pipes
                    .send(server)
                    .await
                    .map_err(|_| std::io::Error::other("the server is gone"))?;
                Ok::<_, std::io::Error>(TokioIo::new(client))
            }
        }),
    );
    Manager {
        fleet,
        metrics,
        triggers,
        channel,
        clusters: std::sync::Mutex::new(cluster_writer),
        cluster_changes,
        _shutdown: shutdown_trigger,
    }
}

impl Manager {
    /// Whether the manager's metrics show `line` (e.g. a counter's value).
    pub fn counted(&self, line: &str) -> bool {
        self.metrics.render().contains(line)
    }

    /// Replaces a WorkerCluster, as its watch would.
    pub fn update_cluster(&self, cluster: WorkerCluster) {
        self.clusters
            .lock()
            .unwrap()
            .apply_watcher_event(&watcher::Event::Apply(cluster));
        self.cluster_changes.send_modify(|()| ());
    }
}

/// An agent's open session: what it sends, and what it received.
pub struct Session {
    pub send: mpsc::UnboundedSender<AgentMessage>,
    pub inbound: tonic::Streaming<ManagerMessage>,
}

pub async fn connect(manager: &Manager, hello: Hello) -> Result<Session, tonic::Status> {
    let (send, outbound) = mpsc::unbounded_channel();
    send.send(message(agent_message::Kind::Hello(hello)))
        .unwrap();
    let response = RelayClient::new(manager.channel.clone())
        .connect(UnboundedReceiverStream::new(outbound))
        .await?;
    Ok(Session {
        send,
        inbound: response.into_inner(),
    })
}

pub fn message(kind: agent_message::Kind) -> AgentMessage {
    AgentMessage { kind: Some(kind) }
}

pub fn hello(cluster: &str, inventory: Vec<InventoryEntry>) -> Hello {
    Hello {
        cluster: cluster.into(),
        agent_version: env!("CARGO_PKG_VERSION").into(),
        inventory,
        ..Hello::default()
    }
}

impl Session {
    /// The next message that is not a heartbeat, within a deadline.
    pub async fn next(&mut self) -> manager_message::Kind {
        loop {
            let received = tokio::time::timeout(Duration::from_secs(10), self.inbound.message())
                .await
                .expect("a message from the manager within 10s")
                .expect("an open stream")
                .expect("not the end of the stream");
            match received.kind.expect("a message kind") {
                manager_message::Kind::Heartbeat(_) => continue,
                kind => return kind,
            }
        }
    }

    pub fn say(&self, kind: agent_message::Kind) {
        self.send.send(message(kind)).expect("the session is open");
    }
}

/// Waits, with a deadline, until `check` holds.
pub async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
