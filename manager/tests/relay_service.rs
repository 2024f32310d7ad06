//! The `jobrelay.v1.Relay` service in one process, over `tokio::io::duplex`
//! (no ports, no cluster): a session says Hello and is welcomed with the
//! DesiredSet, applies and deletes reach the agent, status and gone reach the
//! fleet, a reconnect replays state instead of messages, and an unknown or
//! malformed peer is refused with the right status code.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use jobrelay_manager::events::Events;
use jobrelay_manager::fleet::Fleet;
use jobrelay_manager::fleet_views::{Apply, Cleanup};
use jobrelay_manager::metrics::Metrics;
use jobrelay_manager::pace::Pace;
use jobrelay_manager::registry::Registry;
use jobrelay_manager::session::{RelayService, Sessions};
use jobrelay_manager::worker_cluster::{WorkerCluster, WorkerClusterSpec};
use jobrelay_proto::v1::relay_client::RelayClient;
use jobrelay_proto::v1::relay_server::RelayServer;
use jobrelay_proto::v1::{
    AgentMessage, DeleteReason, Hello, InventoryEntry, ManagerMessage, MirrorGone, MirrorPhase,
    MirrorStatus, agent_message, manager_message,
};
use jobrelay_proto::wire::{CLUSTER_KEY, MANAGED_BY, REMOTE_CLEANUP_FINALIZER};
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, UnboundedReceiverStream};
use tonic::transport::{Channel, Endpoint, Server, Uri};

const ORIGIN: &str = "hub";
const UID: &str = "u1";
/// Long enough that no heartbeat interleaves with what a test waits for.
const HEARTBEAT: Duration = Duration::from_secs(3600);

/// The manager's side: the service served over in-memory pipes, and the
/// fleet it feeds.
struct Manager {
    fleet: Arc<Fleet>,
    metrics: Arc<Metrics>,
    triggers: mpsc::UnboundedReceiver<ObjectRef<Job>>,
    channel: Channel,
    /// Kept, so the sessions never see a shutdown.
    _shutdown: jobrelay_process::shutdown::Trigger,
}

fn key() -> ObjectRef<Job> {
    ObjectRef::new("train").within("ml")
}

/// A manager Job held on cluster w1.
fn held_job() -> Job {
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

async fn manager() -> Manager {
    let (tx, triggers) = mpsc::unbounded_channel();
    let fleet = Arc::new(Fleet::new(tx));
    let (clusters, mut cluster_writer) = reflector::store::<WorkerCluster>();
    cluster_writer.apply_watcher_event(&watcher::Event::Apply(WorkerCluster::new(
        "w1",
        WorkerClusterSpec::default(),
    )));
    let (namespaces, _namespace_writer) = reflector::store();
    let (jobs, mut job_writer) = reflector::store::<Job>();
    job_writer.apply_watcher_event(&watcher::Event::Apply(held_job()));
    let (_synced_tx, synced) = tokio::sync::watch::channel(true);
    let metrics = Arc::new(Metrics::new(
        Arc::clone(&fleet),
        Arc::new(Pace::per_second(1.0)),
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
        jobs,
        synced,
        events: Events::new(unreachable_api(), ORIGIN),
        origin: ORIGIN.into(),
        heartbeat_interval: HEARTBEAT,
        remote_retention: Duration::ZERO,
        shutdown,
    });

    // Every connection the client makes is a fresh pipe handed to the server.
    let (pipes, incoming) = mpsc::channel::<tokio::io::DuplexStream>(4);
    tokio::spawn(
        Server::builder()
            .add_service(RelayServer::new(RelayService { sessions }))
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
        _shutdown: shutdown_trigger,
    }
}

/// An agent's open session: what it sends, and what it received.
struct Session {
    send: mpsc::UnboundedSender<AgentMessage>,
    inbound: tonic::Streaming<ManagerMessage>,
}

async fn connect(manager: &Manager, hello: Hello) -> Result<Session, tonic::Status> {
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

fn message(kind: agent_message::Kind) -> AgentMessage {
    AgentMessage { kind: Some(kind) }
}

fn hello(cluster: &str, inventory: Vec<InventoryEntry>) -> Hello {
    Hello {
        cluster: cluster.into(),
        agent_version: env!("CARGO_PKG_VERSION").into(),
        inventory,
    }
}

impl Session {
    /// The next message that is not a heartbeat, within a deadline.
    async fn next(&mut self) -> manager_message::Kind {
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

    fn say(&self, kind: agent_message::Kind) {
        self.send.send(message(kind)).expect("the session is open");
    }
}

/// Waits, with a deadline, until `check` holds.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_session_is_welcomed_with_the_desired_set_and_carries_applies_status_and_gone() {
    let mut manager = manager().await;
    let mut session = connect(&manager, hello("w1", vec![]))
        .await
        .expect("admitted");
    let manager_message::Kind::Welcome(welcome) = session.next().await else {
        panic!("Welcome first");
    };
    assert_eq!(welcome.origin, ORIGIN);
    assert_eq!(
        welcome.heartbeat_interval,
        prost_types::Duration::try_from(HEARTBEAT).ok()
    );
    let manager_message::Kind::DesiredSet(desired) = session.next().await else {
        panic!("then the DesiredSet");
    };
    let uids: Vec<&str> = desired
        .mirrors
        .iter()
        .map(|m| m.origin_uid.as_str())
        .collect();
    assert_eq!(uids, [UID], "the held Job is desired on its cluster");
    eventually("the fleet to know w1 connected", || {
        manager.fleet.is_connected("w1")
    })
    .await;

    assert_eq!(
        manager
            .fleet
            .ensure_applied("w1", UID, &key(), 1, || b"{}".to_vec()),
        Apply::Sent
    );
    let manager_message::Kind::ApplyMirror(apply) = session.next().await else {
        panic!("the apply");
    };
    assert_eq!(
        (
            apply.origin_uid.as_str(),
            apply.revision,
            apply.job.as_slice()
        ),
        (UID, 1, &b"{}"[..])
    );

    while manager.triggers.try_recv().is_ok() {}
    session.say(agent_message::Kind::MirrorStatus(MirrorStatus {
        origin_uid: UID.into(),
        revision: 1,
        phase: MirrorPhase::Running as i32,
        status: br#"{"active": 1}"#.to_vec(),
    }));
    eventually("the status in the fleet", || {
        manager
            .fleet
            .view("w1", UID)
            .and_then(|v| v.status)
            .map(|s| s.value())
            == Some(serde_json::json!({"active": 1}))
    })
    .await;
    assert_eq!(
        manager.triggers.recv().await,
        Some(key()),
        "the Job is reconciled"
    );

    // A report about a mirror never placed here costs the manager nothing.
    session.say(agent_message::Kind::MirrorStatus(MirrorStatus {
        origin_uid: "never-placed".into(),
        revision: 1,
        phase: MirrorPhase::Running as i32,
        status: b"{}".to_vec(),
    }));
    eventually("the stray report dropped and counted", || {
        manager
            .metrics
            .render()
            .contains("jobrelay_reports_dropped_total{cluster=\"w1\"} 1")
    })
    .await;
    assert!(manager.fleet.view("w1", "never-placed").is_none());

    assert_eq!(
        manager
            .fleet
            .cleanup("w1", UID, &key(), DeleteReason::ManagerJobDeleted),
        Cleanup::Started { first: true }
    );
    let manager_message::Kind::DeleteMirror(delete) = session.next().await else {
        panic!("the delete");
    };
    assert_eq!(
        (delete.namespace.as_str(), delete.name.as_str()),
        ("ml", "train")
    );
    session.say(agent_message::Kind::MirrorGone(MirrorGone {
        origin_uid: UID.into(),
        pods_deleted: 2,
    }));
    eventually("the gone in the fleet", || {
        manager
            .fleet
            .cleanup("w1", UID, &key(), DeleteReason::ManagerJobDeleted)
            == Cleanup::Gone { pods_deleted: 2 }
    })
    .await;
}

#[tokio::test]
async fn a_reconnect_replays_state_not_messages() {
    let manager = manager().await;
    let mut first = connect(&manager, hello("w1", vec![]))
        .await
        .expect("admitted");
    first.next().await;
    first.next().await;
    eventually("w1 connected", || manager.fleet.is_connected("w1")).await;
    assert_eq!(
        manager.fleet.ensure_applied("w1", UID, &key(), 1, Vec::new),
        Apply::Sent
    );
    drop(first);
    eventually("the first session ended", || {
        !manager.fleet.is_connected("w1")
    })
    .await;

    // The agent kept the mirror: its inventory says so, and nothing is resent.
    let held = InventoryEntry {
        origin_uid: UID.into(),
        revision: 1,
        phase: MirrorPhase::Running as i32,
    };
    let mut second = connect(&manager, hello("w1", vec![held]))
        .await
        .expect("admitted again");
    assert!(matches!(
        second.next().await,
        manager_message::Kind::Welcome(_)
    ));
    assert!(matches!(
        second.next().await,
        manager_message::Kind::DesiredSet(_)
    ));
    eventually("w1 connected again", || manager.fleet.is_connected("w1")).await;
    assert_eq!(
        manager.fleet.ensure_applied("w1", UID, &key(), 1, Vec::new),
        Apply::InPlace
    );

    // A newer revision is sent over the new session.
    assert_eq!(
        manager.fleet.ensure_applied("w1", UID, &key(), 2, Vec::new),
        Apply::Sent
    );
    let manager_message::Kind::ApplyMirror(apply) = second.next().await else {
        panic!("the apply of revision 2");
    };
    assert_eq!(apply.revision, 2);
}

#[tokio::test]
async fn an_unknown_cluster_or_a_session_not_opened_by_hello_is_refused() {
    let manager = manager().await;
    let Err(refused) = connect(&manager, hello("ghost", vec![])).await else {
        panic!("a session for an unknown cluster was admitted");
    };
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    assert!(
        refused.message().contains("no WorkerCluster named ghost"),
        "{}",
        refused.message()
    );
    assert!(
        manager
            .metrics
            .render()
            .contains("jobrelay_sessions_refused_total{reason=\"unknown_cluster\"} 1"),
        "{}",
        manager.metrics.render()
    );

    let (send, outbound) = mpsc::unbounded_channel();
    send.send(message(agent_message::Kind::MirrorGone(
        MirrorGone::default(),
    )))
    .unwrap();
    let refused = RelayClient::new(manager.channel.clone())
        .connect(UnboundedReceiverStream::new(outbound))
        .await
        .expect_err("a session not opened by Hello is refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(!manager.fleet.is_connected("ghost"));
}

#[tokio::test]
async fn an_agent_of_an_unsupported_version_is_refused_saying_which_versions_are_taken() {
    let manager = manager().await;
    let mut newer = hello("w1", vec![]);
    newer.agent_version = "99.0.0".into();
    let Err(refused) = connect(&manager, newer).await else {
        panic!("an agent newer than the manager was admitted");
    };
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains("upgrade the manager first"),
        "{}",
        refused.message()
    );
    assert!(!manager.fleet.is_connected("w1"));
    assert!(
        manager
            .metrics
            .render()
            .contains("jobrelay_sessions_refused_total{reason=\"version_skew\"} 1"),
        "{}",
        manager.metrics.render()
    );
}
