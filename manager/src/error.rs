//! Why the manager cannot start or stopped: each error names the flag, file
//! or object to look at.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--origin (JOBRELAY_ORIGIN) must not be empty")]
    NoOrigin,
    #[error(transparent)]
    Process(#[from] jobrelay_process::Error),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(
        "the WorkerCluster CRD (workerclusters.jobrelay.dev) is not installed in this cluster; install it with `jobrelay-manager crd | kubectl apply -f -` or the Helm chart"
    )]
    NoCrd,
    #[error("reading whether this cluster serves jobset.x-k8s.io/v1alpha2 (API discovery): {0}")]
    Discovery(#[source] kube::Error),
    #[error("cannot list WorkerClusters: {0}")]
    WorkerClusters(#[source] kube::Error),
    #[error(
        "cannot read the kube-system namespace, whose UID names this manager installation to agents: {0}"
    )]
    Instance(#[source] kube::Error),
    #[error(
        "cannot read or make Secret {secret}, the key that seals where each Job runs (--placement-key-secret; the manager needs get, create and patch on it): {source}"
    )]
    SealKey {
        secret: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "Secret {secret} (--placement-key-secret) holds no key: its data.key must be at least 32 bytes; delete the Secret to have a new key made (Jobs placed before are then trusted only where their agents report their mirrors)"
    )]
    SealKeyInvalid { secret: String },
    #[error("the system has no random source to make the placement key from")]
    NoRandom,
    #[error("the Relay server failed: {0}")]
    Serve(#[from] tonic::transport::Error),
    #[error(transparent)]
    Election(#[from] crate::leader::decide::SettingsError),
    #[error(
        "no identity for the Lease: set --identity (JOBRELAY_IDENTITY), e.g. to the Pod's name"
    )]
    NoIdentity,
    #[error("the manager stopped before it could lead")]
    NoLeader,
    #[error("stepped down: {0}")]
    SteppedDown(#[from] crate::leader::SteppedDown),
    #[error("a task of the manager ended abnormally: {0}")]
    Task(#[from] tokio::task::JoinError),
}
