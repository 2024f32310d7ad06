//! The first steps: the command line and configuration file read and checked,
//! and the clients the manager writes with — fenced, and the two that write
//! outside the fence (the Lease, the leader's Pod label).

use jobrelay_process::Fence;
use kube::api::{Api, ListParams};

use crate::Error;
use crate::cli::Args;
use crate::clusters::worker_cluster::WorkerCluster;
use crate::config::Config;
use crate::kinds::RelayedKind;
use crate::leader::decide::Settings;
use crate::leader::pod_label::PodLabel;
use jobrelay_kinds::jobset::JobSet;
use jobrelay_proto::kinds::KindName;

/// What the command line and the configuration file say, checked.
pub(super) struct Checked {
    pub origin: String,
    pub identity: String,
    pub settings: Settings,
    pub config: Config,
    pub tls: Option<jobrelay_process::PemFiles>,
    /// Every write passes it; the Lease keeper opens it while this replica
    /// leads (without election it is always open).
    pub fence: Fence,
}

impl Checked {
    pub(super) fn read(args: &Args) -> Result<Checked, Error> {
        let origin = args.origin.clone().unwrap_or_default();
        if origin.is_empty() {
            return Err(Error::NoOrigin);
        }
        let tls = args.process.certificates.files(
            args.client_ca.as_ref(),
            "--client-ca",
            args.insecure_plaintext,
        )?;
        let config = match &args.config {
            Some(path) => jobrelay_process::config_file::load(path, Config::parse)?,
            None => Config::default(),
        };
        tracing::info!(?config, "configuration");
        let election = &args.election;
        Ok(Checked {
            origin,
            identity: election.identity().ok_or(Error::NoIdentity)?,
            settings: election.settings()?,
            config,
            tls,
            fence: match election.leader_elect {
                true => Fence::default(),
                false => Fence::open(),
            },
        })
    }
}

/// Makes Kubernetes clients as this replica: behind `fence`, rate-limited.
pub(super) struct Clients<'a> {
    args: &'a Args,
    user_agent: String,
}

impl<'a> Clients<'a> {
    pub(super) fn new(args: &'a Args, identity: &str) -> Clients<'a> {
        let user_agent = format!(
            "jobrelay-manager/{} ({identity})",
            env!("CARGO_PKG_VERSION")
        );
        Clients { args, user_agent }
    }

    pub(super) async fn behind(&self, fence: Fence) -> Result<kube::Client, Error> {
        let limit = self.args.process.kube_api.rate_limit()?;
        let kubeconfig = self.args.process.kubeconfig.as_deref();
        Ok(
            jobrelay_process::kube_client::fenced_client(
                kubeconfig,
                limit,
                fence,
                &self.user_agent,
            )
            .await?,
        )
    }

    /// The leader's label on its Pod, written outside the fence; a mark an
    /// earlier container of this Pod left is cleared before anything else
    /// (a later change of leadership writes it again; a failure here leaves
    /// at worst a stale mark on a replica not yet listening).
    pub(super) async fn pod_label(&self) -> Result<Option<PodLabel>, Error> {
        let Some((namespace, name)) = self.args.election.pod() else {
            return Ok(None);
        };
        let label = PodLabel::new(self.behind(Fence::open()).await?, namespace, name);
        let _ = label.mark(false).await;
        Ok(Some(label))
    }
}

/// Stops with a clear error when the WorkerCluster CRD is not installed or
/// cannot be read.
pub(super) async fn worker_clusters(client: &kube::Client) -> Result<Api<WorkerCluster>, Error> {
    let api: Api<WorkerCluster> = Api::all(client.clone());
    match api.list(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(api),
        Err(kube::Error::Api(status)) if status.code == 404 => Err(Error::NoCrd),
        Err(error) => Err(Error::WorkerClusters(error)),
    }
}

/// The kinds besides Jobs this cluster serves, so the manager relays them:
/// JobSets where their CRD is installed. Read once at start; a manager
/// started before the CRD was installed is restarted to relay JobSets.
pub(super) async fn served_kinds(client: &kube::Client) -> Result<Vec<KindName>, Error> {
    let served = jobrelay_kinds::jobset::served(client)
        .await
        .map_err(Error::Discovery)?;
    tracing::info!(kind = %JobSet::NAME, served, "relaying JobSets only where this cluster serves them");
    Ok(served.then_some(JobSet::NAME).into_iter().collect())
}
