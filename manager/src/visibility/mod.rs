//! jobrelay's aggregated API, `visibility.jobrelay.dev/v1alpha1`: the logs
//! of a relayed Job's Pods, read on its worker by the agent and streamed
//! through the agent's session — no worker credentials anywhere, no port
//! open on the worker. The API server reaches it through an APIService
//! (`--enable-aggregator-routing` or a routed Service), authenticates the
//! caller and says who it is in headers on a connection it makes with its
//! front proxy's client certificate ([`front_proxy`]); jobrelay asks the API
//! server whether that caller may `get` `jobs/log` ([`authorize`]), finds
//! the cluster that holds the Job's mirror, and opens a stream through its
//! agent ([`crate::log_streams`]), bounded per caller, per cluster and in
//! all. Only the leader holds sessions, so only the leader serves;
//! the chart's Service selects it as the agents' does.

pub mod authorize;
pub mod front_proxy;
pub mod reply;
pub mod request;

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, StreamBody};
use hyper::{Method, Request, Response, StatusCode};
use jobrelay_process::serving::{self, ServingTls, Tls};
use jobrelay_process::{Shutdown, Tasks};
use jobrelay_proto::v1::{LogEndReason, LogOpen, manager_message::Kind};
use jobrelay_proto::wire::{MANAGED_BY, VISIBILITY_GROUP};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use tracing::{debug, info, warn};

use crate::cli::Args;
use crate::fleet::message;
use crate::kinds::RelayedKind;
use crate::log_streams as streams;
use crate::session::Sessions;
use crate::webhook::rotation::Rotation;
use front_proxy::FrontProxy;
use reply::{Body, Refusal};
use request::{LogQuery, Route};

/// How long a stream waits for the agent's first word before answering
/// 200 anyway (the agent says at once whether the logs can be read).
const FIRST_WITHIN: Duration = Duration::from_secs(10);
/// How often the front proxy's ConfigMap is looked for while it is missing.
const PROXY_RETRY: Duration = Duration::from_secs(10);

/// What each request is answered with.
struct LogsApi {
    client: kube::Client,
    proxy: FrontProxy,
    sessions: Arc<Sessions>,
}

/// Serves the API if `--visibility-addr` is set: binds it now (a bad
/// address stops the manager at start), then — once the front proxy's
/// settings are read and the certificate the manager keeps exists — serves
/// until the shutdown.
pub async fn start(
    args: &Args,
    client: kube::Client,
    sessions: Arc<Sessions>,
    shutdown: Shutdown,
    tasks: &Tasks,
) -> Result<(), crate::Error> {
    let flags = &args.visibility;
    let (Some(addr), Some(secret), Some(api_service)) = (
        flags.visibility_addr,
        flags.visibility_certificate_secret.clone(),
        flags.visibility_api_service.clone(),
    ) else {
        return Ok(());
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(jobrelay_process::Error::listen("the logs API", addr))?;
    let namespace = &args.election.lease_namespace;
    let names = flags.visibility_names.clone();
    let rotation = Rotation::for_api_service(&client, namespace, secret, api_service, names);
    let reload = args.process.certificates.certificate_reload_interval;
    let tasks_ = tasks.clone();
    tasks.spawn_to_end(async move {
        let Some(proxy) = front_proxy(&client, &shutdown).await else {
            return;
        };
        let Some((pem, changes, follow)) = rotation.start(reload, shutdown.clone()).await else {
            return;
        };
        let tls = match ServingTls::verifying_clients(&pem, proxy.ca.as_bytes()) {
            Ok(tls) => Arc::new(tls),
            Err(error) => return warn!(%error, "the logs API cannot be served"),
        };
        tasks_.spawn(Arc::clone(&tls).follow(changes));
        tasks_.spawn_to_end(follow);
        let api = Arc::new(LogsApi {
            client,
            proxy,
            sessions,
        });
        info!(listen = %addr, group = VISIBILITY_GROUP, "serving the logs API");
        let connection = move |stream: Tls| {
            let api = Arc::clone(&api);
            // The handshake verified the chain of a certificate shown.
            let shown = stream.get_ref().1.peer_certificates().is_some();
            let name = serving::client_common_name(&stream);
            let proxied = shown && front_proxy::allowed(&api.proxy, name.as_deref());
            let service = hyper::service::service_fn(move |request| {
                let api = Arc::clone(&api);
                async move { Ok::<_, std::convert::Infallible>(api.answer(request, proxied).await) }
            });
            serving::http1(stream, service)
        };
        if let Err(error) = serving::accept(listener, tls, shutdown, connection).await {
            warn!(%error, "the logs API stopped");
        }
    });
    Ok(())
}

/// Reads the front proxy's settings, looking again while they are missing;
/// `None` if the shutdown came first.
async fn front_proxy(client: &kube::Client, shutdown: &Shutdown) -> Option<FrontProxy> {
    let (namespace, name) = front_proxy::CONFIG_MAP;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    loop {
        match maps.get_opt(name).await {
            Ok(Some(map)) => match front_proxy::read(&map.data.unwrap_or_default()) {
                Ok(proxy) => return Some(proxy),
                Err(error) => warn!(%error, "the logs API waits for the API server's front proxy"),
            },
            Ok(None) => warn!("the logs API waits for ConfigMap {namespace}/{name}"),
            Err(error) => warn!(%error, "cannot read ConfigMap {namespace}/{name}"),
        }
        tokio::select! {
            () = tokio::time::sleep(PROXY_RETRY) => {}
            () = shutdown.clone().requested() => return None,
        }
    }
}

impl LogsApi {
    async fn answer(
        &self,
        request: Request<hyper::body::Incoming>,
        proxied: bool,
    ) -> Response<Body> {
        let path = request.uri().path().to_string();
        match request::route(&path) {
            Route::Health => reply::respond(StatusCode::OK, "text/plain", b"ok".to_vec()),
            Route::Resources => {
                let listed = serde_json::to_vec(&reply::resources()).unwrap_or_default();
                reply::respond(StatusCode::OK, "application/json", listed)
            }
            Route::NotFound => Refusal::not_found(format!("{path} is not served here")).response(),
            Route::JobLog { namespace, name } => {
                match self.logs(&request, proxied, &namespace, &name).await {
                    Ok(response) => response,
                    Err(refusal) => {
                        debug!(job = %format!("{namespace}/{name}"), code = %refusal.code, message = %refusal.message, "logs refused");
                        refusal.response()
                    }
                }
            }
        }
    }

    /// Opens the stream of a Job's logs: who asks, whether they may, where
    /// the mirror is, and the agent's first word.
    async fn logs<B>(
        &self,
        request: &Request<B>,
        proxied: bool,
        namespace: &str,
        name: &str,
    ) -> Result<Response<Body>, Refusal> {
        if request.method() != Method::GET {
            let only = "only GET is served on a Job's logs";
            return Err(Refusal::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                only,
            ));
        }
        let unauthorized = |why: &str| Refusal::new(StatusCode::UNAUTHORIZED, "Unauthorized", why);
        if !proxied {
            return Err(unauthorized(
                "the logs API answers only the API server (its front proxy's client certificate); call it through the API server",
            ));
        }
        let headers: Vec<(String, String)> = request
            .headers()
            .iter()
            .filter_map(|(n, v)| Some((n.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect();
        let caller = request::caller(&self.proxy.headers, &headers)
            .ok_or_else(|| unauthorized("the API server named no user"))?;
        let query = request::log_query(request.uri().query())
            .map_err(|e| Refusal::bad_request(e.to_string()))?;
        match authorize::ask(&self.client, &caller, namespace, name).await {
            Ok(authorize::Verdict::Allowed) => {}
            Ok(authorize::Verdict::Denied(reason)) => {
                return Err(Refusal::forbidden(reply::forbidden(
                    &caller.user,
                    namespace,
                    name,
                    &reason,
                )));
            }
            Err(error) => {
                let text = format!(
                    "cannot ask the API server whether {} may read these logs: {error}",
                    caller.user
                );
                return Err(Refusal::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "InternalError",
                    text,
                ));
            }
        }
        if !self.sessions.fence.is_open(tokio::time::Instant::now()) {
            return Err(Refusal::unavailable(
                "this manager replica does not lead, and only the leader holds the agents' sessions; try again",
            ));
        }
        let job = self
            .sessions
            .stores
            .jobs
            .get(&ObjectRef::<Job>::new(name).within(namespace))
            .filter(|job| job.managed_by() == Some(MANAGED_BY))
            .ok_or_else(|| Refusal::not_found(reply::not_relayed(namespace, name)))?;
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let fleet = &self.sessions.fleet;
        let cluster = fleet.holding(&uid).ok_or_else(|| {
            let stands = match (job.metadata.deletion_timestamp.is_some(), job.is_finished()) {
                (true, _) => reply::Stands::Deleted,
                (false, true) => reply::Stands::Finished,
                (false, false) => reply::Stands::Waiting,
            };
            Refusal::not_found(reply::no_mirror(namespace, name, stands))
        })?;
        let (session, outbox) = fleet.session_of(&cluster).ok_or_else(|| {
            Refusal::unavailable(format!(
                "cluster {cluster}'s agent is not connected, and Job {namespace}/{name}'s Pods run there; try again once it is (kubectl get workercluster {cluster})"
            ))
        })?;
        let logs = &self.sessions.logs;
        let mut opened = logs
            .open(&caller.user, &cluster, session)
            .map_err(|refused| Refusal::too_many(refused.to_string()))?;
        let stream = opened.stream;
        let open = log_open(stream, namespace, &uid, query);
        if !matches!(
            outbox.send(message(Kind::LogOpen(open))),
            crate::outbox::Delivery::Queued
        ) {
            logs.close(stream);
            return Err(Refusal::unavailable(format!(
                "cluster {cluster}'s session is busy or ending; try again"
            )));
        }
        info!(job = %format!("{namespace}/{name}"), %cluster, user = %caller.user, stream, "log stream opened");
        let first = match tokio::time::timeout(FIRST_WITHIN, opened.from_agent.recv()).await {
            Ok(Some(first)) => Some(first),
            Ok(None) => {
                logs.close(stream);
                return Err(Refusal::unavailable(format!(
                    "cluster {cluster}'s agent disconnected before the logs began"
                )));
            }
            Err(_) => None,
        };
        if let Some(end) = first.as_ref().and_then(|f| f.end.as_ref()) {
            let reason = LogEndReason::try_from(end.reason).unwrap_or_default();
            if reason != LogEndReason::Done {
                logs.close(stream);
                return Err(reply::ended_early(
                    reason,
                    format!("cluster {cluster}: {}", end.message),
                ));
            }
        }
        let frames = streams::body(Arc::clone(logs), outbox, opened, first, cluster);
        let body = BodyExt::boxed(StreamBody::new(frames));
        let mut response = Response::new(body);
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/plain"),
        );
        Ok(response)
    }
}

/// The LogOpen that asks the agent for what `query` asks.
fn log_open(stream: u64, namespace: &str, uid: &str, query: LogQuery) -> LogOpen {
    LogOpen {
        stream,
        namespace: namespace.into(),
        origin_uid: uid.into(),
        pod: query.pod.unwrap_or_default(),
        all_pods: query.all_pods,
        container: query.container.unwrap_or_default(),
        follow: query.follow,
        tail_lines: query.tail_lines,
        since_seconds: query.since_seconds,
        previous: query.previous,
        timestamps: query.timestamps,
        window: streams::WINDOW,
    }
}
