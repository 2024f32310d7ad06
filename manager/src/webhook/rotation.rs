//! The webhook's own certificate, kept by the manager in a Secret of its
//! namespace (`--webhook-certificate-secret`): every replica reads it each
//! `--certificate-reload-interval` and serves what it holds; the leader
//! makes it when it is missing and again when [`certificate::plan`] says
//! so (a follower's write is held back by the write fence, and it serves
//! what the leader wrote), and every replica sees that the webhook
//! configuration's `caBundle` names the Secret's CAs. Nothing of it is in
//! the chart's output, so `helm template` renders the same every time.

use std::sync::Arc;
use std::time::Duration;

use jobrelay_process::{Pem, Shutdown};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tracing::{debug, info, warn};

use super::certificate::{self, Plan};
use super::issue::{self, Stored};

/// How often a replica with nothing to serve yet looks again.
const WAITING: Duration = Duration::from_secs(2);

/// Where the certificate is kept and whom it is for.
pub struct Rotation {
    secrets: Api<Secret>,
    /// What is told to trust the certificate's CA.
    trusted: Trusted,
    /// The Secret's name, in the manager's namespace.
    pub secret: String,
    /// The name the CA is made for: the configuration or APIService.
    pub configuration: String,
    /// The DNS names and IP addresses the API server calls it by.
    pub names: Vec<String>,
    /// What serves it, for the log: "the webhook", "the logs API".
    what: &'static str,
}

/// Whom the API server calls with the certificate, and so trusts its CA.
pub enum Trusted {
    /// The webhooks of a MutatingWebhookConfiguration.
    Webhooks(Api<MutatingWebhookConfiguration>),
    /// An APIService (an aggregated API).
    ApiService(Api<APIService>),
}

impl Rotation {
    /// The webhook's certificate, trusted by `configuration`'s webhooks.
    pub fn new(
        client: &kube::Client,
        namespace: &str,
        secret: String,
        configuration: String,
        names: Vec<String>,
    ) -> Self {
        Rotation {
            secrets: Api::namespaced(client.clone(), namespace),
            trusted: Trusted::Webhooks(Api::all(client.clone())),
            secret,
            configuration,
            names,
            what: "the webhook",
        }
    }

    /// A certificate for an aggregated API, trusted by `api_service`.
    pub fn for_api_service(
        client: &kube::Client,
        namespace: &str,
        secret: String,
        api_service: String,
        names: Vec<String>,
    ) -> Self {
        Rotation {
            secrets: Api::namespaced(client.clone(), namespace),
            trusted: Trusted::ApiService(Api::all(client.clone())),
            secret,
            configuration: api_service,
            names,
            what: "the logs API",
        }
    }

    /// Waits for a certificate to serve, then follows the Secret every
    /// `every` until the shutdown; `None` if the shutdown came first.
    pub async fn start(
        self,
        every: Duration,
        shutdown: Shutdown,
    ) -> Option<(Pem, watch::Receiver<Arc<Pem>>, impl Future<Output = ()>)> {
        // Missed ticks are delayed, not bunched, as the certificate files'
        // reads are.
        let ticks = |period| {
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
            ticks
        };
        let mut waiting = ticks(every.min(WAITING));
        let first = loop {
            tokio::select! {
                _ = waiting.tick() => {}
                () = shutdown.clone().requested() => return None,
            }
            if let Some(stored) = self.pass().await {
                break stored;
            }
        };
        let pem = first.serving();
        let (changes, followed) = watch::channel(Arc::new(pem.clone()));
        let mut following = ticks(every);
        let follow = async move {
            let mut serving = first;
            // The first tick is at once; the Secret was just read.
            following.tick().await;
            loop {
                tokio::select! {
                    _ = following.tick() => {}
                    () = shutdown.clone().requested() => return,
                }
                if let Some(stored) = self.pass().await
                    && stored.cert != serving.cert
                {
                    changes.send_replace(Arc::new(stored.serving()));
                    serving = stored;
                }
            }
        };
        Some((pem, followed, follow))
    }

    /// One look: the Secret read, made or made again where due, the
    /// configuration told to trust its CAs; what it holds to serve.
    async fn pass(&self) -> Option<Stored> {
        let found = match self.secrets.get_opt(&self.secret).await {
            Ok(found) => found,
            Err(error) => {
                warn!(%error, secret = %self.secret, what = self.what, "cannot read the serving certificate");
                return None;
            }
        };
        let stored = found.as_ref().and_then(Stored::of_secret);
        let now = Timestamp::now().as_second();
        let validity = stored.as_ref().and_then(Stored::validity);
        let plan = certificate::plan(now, validity.as_ref(), &self.names);
        let subject = self.configuration.as_str();
        let stored = match issue::issue(plan, stored.as_ref(), &self.names, subject, now) {
            Ok(Some(made)) => match self.write(&made, found.as_ref()).await {
                Ok(()) => {
                    info!(secret = %self.secret, new_ca = plan == Plan::NewCa, what = self.what, "made the serving certificate");
                    Some(made)
                }
                Err(error) => {
                    match withheld(&error) {
                        // A follower's; the leader writes it.
                        true => {
                            debug!(%error, secret = %self.secret, what = self.what, "the serving certificate not written")
                        }
                        false => {
                            warn!(%error, secret = %self.secret, what = self.what, "cannot write the serving certificate")
                        }
                    }
                    stored.filter(|_| validity.is_some())
                }
            },
            Ok(None) => stored.filter(|_| validity.is_some()),
            Err(error) => {
                warn!(%error, what = self.what, "cannot make the serving certificate");
                stored.filter(|_| validity.is_some())
            }
        }?;
        let flag = match self.trusted {
            Trusted::Webhooks(_) => "webhook-certificate-secret",
            Trusted::ApiService(_) => "visibility-certificate-secret",
        };
        jobrelay_process::metrics::certificate_read(flag, stored.cert.as_bytes());
        self.trust(&stored.bundle).await;
        Some(stored)
    }

    async fn write(&self, made: &Stored, found: Option<&Secret>) -> Result<(), kube::Error> {
        let params = PostParams::default();
        match found {
            None => {
                let secret = made.to_secret(&self.secret, None);
                self.secrets.create(&params, &secret).await?;
            }
            Some(found) => {
                let version = found.metadata.resource_version.clone();
                let secret = made.to_secret(&self.secret, version);
                self.secrets.replace(&self.secret, &params, &secret).await?;
            }
        }
        Ok(())
    }

    /// Tells whom the API server calls with the certificate to trust
    /// `bundle`, where it trusts another.
    async fn trust(&self, bundle: &str) {
        match &self.trusted {
            Trusted::Webhooks(configurations) => self.trust_webhooks(configurations, bundle).await,
            Trusted::ApiService(services) => self.trust_api_service(services, bundle).await,
        }
    }

    /// Gives the APIService `bundle` as its `caBundle` where it holds
    /// another.
    async fn trust_api_service(&self, services: &Api<APIService>, bundle: &str) {
        let name = &self.configuration;
        let held = match services.get_opt(name).await {
            Ok(Some(service)) => service.spec.and_then(|s| s.ca_bundle).map(|b| b.0),
            Ok(None) => return debug!(api_service = %name, "no APIService to give the CA yet"),
            Err(error) => return warn!(%error, api_service = %name, "cannot read the APIService"),
        };
        let Some(patch) = certificate::api_service_patch(held.as_deref(), bundle.as_bytes()) else {
            return;
        };
        match services
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => info!(api_service = %name, "the APIService trusts the logs API's CA"),
            Err(error) if withheld(&error) => {
                debug!(%error, api_service = %name, "the APIService not patched")
            }
            Err(error) => warn!(%error, api_service = %name, "cannot give the APIService its CA"),
        }
    }

    /// Gives each webhook of the configuration `bundle` as its `caBundle`
    /// where it holds another.
    async fn trust_webhooks(
        &self,
        configurations: &Api<MutatingWebhookConfiguration>,
        bundle: &str,
    ) {
        let configuration = match configurations.get_opt(&self.configuration).await {
            Ok(Some(configuration)) => configuration,
            Ok(None) => {
                debug!(configuration = %self.configuration, "no webhook configuration to give the CA yet");
                return;
            }
            Err(error) => {
                warn!(%error, configuration = %self.configuration, "cannot read the webhook configuration");
                return;
            }
        };
        let held: Vec<(String, Option<Vec<u8>>)> = configuration
            .webhooks
            .iter()
            .flatten()
            .map(|hook| {
                let bundle = hook.client_config.ca_bundle.as_ref().map(|b| b.0.clone());
                (hook.name.clone(), bundle)
            })
            .collect();
        let Some(patch) = certificate::bundle_patch(&held, bundle.as_bytes()) else {
            return;
        };
        let patched = configurations
            .patch(
                &self.configuration,
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await;
        match patched {
            Ok(_) => {
                info!(configuration = %self.configuration, "the webhook configuration trusts the webhook's CA")
            }
            Err(error) if withheld(&error) => {
                debug!(%error, configuration = %self.configuration, "the webhook configuration not patched")
            }
            Err(error) => {
                warn!(%error, configuration = %self.configuration, "cannot give the webhook configuration its CA")
            }
        }
    }
}

/// Whether the write fence held `error`'s request back: this replica does
/// not lead.
fn withheld(error: &kube::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = cause {
        if current.is::<jobrelay_process::fence::Withheld>() {
            return true;
        }
        cause = current.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_the_fence_held_back_is_told_from_a_refusal() {
        let fenced = kube::Error::Service(Box::new(jobrelay_process::fence::Withheld {
            method: http::Method::PUT,
            path: "/api/v1/namespaces/x/secrets/y".into(),
        }));
        assert!(withheld(&fenced));
        let status = kube::core::Status::failure("forbidden", "Forbidden").with_code(403);
        let refused = kube::Error::Api(status.boxed());
        assert!(!withheld(&refused));
    }
}
