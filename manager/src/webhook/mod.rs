//! The manager's mutating admission webhook: a Job created with only a
//! Kueue queue label, in a LocalQueue whose ClusterQueue lists an
//! AdmissionCheck jobrelay answers, is given `spec.managedBy:
//! jobrelay.dev/manager` — as Kueue does for MultiKueue — so users set only
//! the queue label.
//!
//! Every replica serves it (not only the leader), from caches of its own of
//! LocalQueues, ClusterQueues and AdmissionChecks, started once Kueue is
//! found. What cannot be decided is allowed unchanged with a warning; the
//! webhook is registered with `failurePolicy: Ignore`, so a manager outage
//! never blocks a Job (jobrelay's check then rejects it, saying how to
//! recreate it). The decision is [`decide`]; the review, [`review`].

pub mod certificate;
pub mod decide;
pub mod issue;
pub mod review;
pub mod rotation;

use std::sync::{Arc, RwLock};

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Response, StatusCode};
use jobrelay_process::serving::{self, Respond, ServingFiles, ServingTls};
use jobrelay_process::{Shutdown, Tasks, cache::trim};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::caches::{all_synced, cache};
use crate::cli::{Args, WebhookCertificate};
use crate::kueue::discovery::{DISCOVERY_INTERVAL, installed};
use crate::kueue::types::{AdmissionCheck, ClusterQueue, LocalQueue};
use decide::{Defaulting, Queues};
use review::{Caches, Outcome};
use rotation::Rotation;

/// The webhook's caches of Kueue's objects, and whether all have listed.
pub struct Cached {
    local_queues: Store<LocalQueue>,
    cluster_queues: Store<ClusterQueue>,
    checks: Store<AdmissionCheck>,
    synced: watch::Receiver<bool>,
}

impl Queues for Cached {
    fn cluster_queue_of(&self, namespace: &str, name: &str) -> Option<String> {
        let queue = self
            .local_queues
            .get(&ObjectRef::new(name).within(namespace))?;
        Some(queue.spec.cluster_queue.clone())
    }

    fn checks_of(&self, cluster_queue: &str) -> Option<Vec<String>> {
        let queue = self.cluster_queues.get(&ObjectRef::new(cluster_queue))?;
        Some(queue.admission_checks().map(str::to_string).collect())
    }

    fn controller_of(&self, check: &str) -> Option<String> {
        let check = self.checks.get(&ObjectRef::new(check))?;
        Some(check.spec.controller_name.clone())
    }
}

/// What this replica knows of Kueue.
enum Kueue {
    /// Not looked for yet, or the API server could not say.
    Unknown,
    Absent,
    Installed(Cached),
}

/// Serves the webhook if the flags ask for it: binds its address, loads its
/// certificate — from files, reloaded when they changed
/// (`--certificate-reload-interval`), or from the Secret the manager keeps
/// ([`rotation`]), served once there is one — and watches Kueue's queues
/// once Kueue is found. Errors of the flags or the files stop the manager
/// at start. Runs until the shutdown.
pub async fn start(
    args: &Args,
    client: kube::Client,
    shutdown: Shutdown,
    tasks: &Tasks,
) -> Result<(), crate::Error> {
    let flags = &args.webhook;
    let reload = args.process.certificates.certificate_reload_interval;
    let (Some(addr), Some(certificate)) = (flags.webhook_addr, flags.certificate()) else {
        return Ok(());
    };
    let source = match certificate {
        WebhookCertificate::Files { cert, key } => {
            let files = ServingFiles {
                cert,
                key,
                cert_flag: "--webhook-tls-cert",
                key_flag: "--webhook-tls-key",
            };
            let pem = files.read()?;
            Source::Files(files, pem)
        }
        WebhookCertificate::Kept {
            secret,
            configuration,
            names,
        } => {
            let namespace = &args.election.lease_namespace;
            let rotation = Rotation::new(&client, namespace, secret, configuration, names);
            Source::Kept(Box::new(rotation))
        }
    };
    let listener =
        tokio::net::TcpListener::bind(addr)
            .await
            .map_err(jobrelay_process::Error::listen(
                "the admission webhook",
                addr,
            ))?;
    let kueue = Arc::new(RwLock::new(Kueue::Unknown));
    tasks.spawn_to_end(find_kueue(
        client.clone(),
        Arc::clone(&kueue),
        shutdown.clone(),
        tasks.clone(),
    ));
    let respond = respond(kueue);
    match source {
        Source::Files(files, pem) => {
            let tls = Arc::new(ServingTls::new(&pem)?);
            tasks.spawn(Arc::clone(&tls).follow(files.watch(pem, reload)));
            info!(listen = %addr, path = review::PATH, "serving the admission webhook");
            tasks.spawn_to_end(serve(listener, tls, respond, shutdown));
        }
        Source::Kept(rotation) => {
            let tasks_ = tasks.clone();
            tasks.spawn_to_end(async move {
                let Some((pem, changes, follow)) = rotation.start(reload, shutdown.clone()).await
                else {
                    return;
                };
                let tls = match ServingTls::new(&pem) {
                    Ok(tls) => Arc::new(tls),
                    Err(error) => {
                        warn!(%error, "the webhook's certificate cannot be served");
                        return;
                    }
                };
                tasks_.spawn(Arc::clone(&tls).follow(changes));
                tasks_.spawn_to_end(follow);
                info!(listen = %addr, path = review::PATH, "serving the admission webhook");
                serve(listener, tls, respond, shutdown).await;
            });
        }
    }
    Ok(())
}

/// Where the certificate comes from, read or set up before the address is
/// bound.
enum Source {
    Files(ServingFiles, jobrelay_process::Pem),
    Kept(Box<Rotation>),
}

/// Serves the webhook on `listener` until the shutdown.
async fn serve(
    listener: tokio::net::TcpListener,
    tls: Arc<ServingTls>,
    respond: Respond,
    shutdown: Shutdown,
) {
    if let Err(error) = serving::serve(listener, tls, respond, shutdown).await {
        warn!(%error, "the admission webhook stopped");
    }
}

/// Looks for Kueue until it is installed, then fills the caches.
async fn find_kueue(
    client: kube::Client,
    kueue: Arc<RwLock<Kueue>>,
    shutdown: Shutdown,
    tasks: Tasks,
) {
    loop {
        match installed(&client).await {
            Some(true) => break,
            Some(false) => *kueue.write().unwrap_or_else(|p| p.into_inner()) = Kueue::Absent,
            None => {}
        }
        tokio::select! {
            () = tokio::time::sleep(DISCOVERY_INTERVAL) => {}
            () = shutdown.clone().requested() => return,
        }
    }
    let (local_queues, local_writer) = reflector::store();
    let (cluster_queues, cluster_writer) = reflector::store();
    let (checks, checks_writer) = reflector::store();
    let local_synced = cache(Api::all(client.clone()), trim, local_writer, |_| {}, &tasks);
    let cluster_synced = cache(
        Api::all(client.clone()),
        trim,
        cluster_writer,
        |_| {},
        &tasks,
    );
    let checks_synced = cache(Api::all(client), trim, checks_writer, |_| {}, &tasks);
    let cached = Cached {
        local_queues,
        cluster_queues,
        checks,
        synced: all_synced([local_synced, cluster_synced, checks_synced]),
    };
    *kueue.write().unwrap_or_else(|p| p.into_inner()) = Kueue::Installed(cached);
    info!("Kueue is installed: the admission webhook defaults spec.managedBy of queued Jobs");
}

/// Answers reviews on [`review::PATH`] from what `kueue` holds.
fn respond(kueue: Arc<RwLock<Kueue>>) -> Respond {
    Arc::new(move |method: &Method, path: &str, body: Bytes| {
        if method != Method::POST || path != review::PATH {
            let text = format!("not found; the webhook is POST {}\n", review::PATH);
            return reply(StatusCode::NOT_FOUND, "text/plain", text.into_bytes());
        }
        let (review, outcome) = {
            let kueue = kueue.read().unwrap_or_else(|p| p.into_inner());
            let caches = match &*kueue {
                Kueue::Absent => Caches::NoKueue,
                Kueue::Unknown => Caches::NotSynced,
                Kueue::Installed(cached) if !*cached.synced.borrow() => Caches::NotSynced,
                Kueue::Installed(cached) => Caches::Synced(cached),
            };
            review::answer(&body, caches)
        };
        log(&outcome);
        let body = serde_json::to_vec(&review).unwrap_or_default();
        reply(StatusCode::OK, "application/json", body)
    })
}

fn reply(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

fn log(outcome: &Outcome) {
    match outcome {
        Outcome::Decided {
            job,
            defaulting:
                Defaulting::SetManagedBy {
                    cluster_queue,
                    check,
                },
        } => {
            info!(%job, %cluster_queue, %check, "Job created with spec.managedBy: {}", crate::kueue::CONTROLLER_NAME)
        }
        Outcome::Decided {
            job,
            defaulting: Defaulting::Leave(why),
        } => debug!(%job, ?why, "Job left as created"),
        Outcome::NoKueue => debug!("Kueue is not installed; Job left as created"),
        Outcome::Undecided { job, why } => {
            warn!(%job, %why, "Job allowed unchanged: cannot decide its spec.managedBy")
        }
    }
}
