//! Why the agent cannot start: each error names the flag, file or setting to
//! look at.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--origin (JOBRELAY_ORIGIN) must not be empty")]
    NoOrigin,
    #[error("--cluster (JOBRELAY_CLUSTER) must not be empty")]
    NoCluster,
    #[error(transparent)]
    Process(#[from] jobrelay_process::Error),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Dial(#[from] crate::dial::DialError),
    #[error("terminatedPods.labelSelector {selector:?}: the API server refused it: {source}")]
    TerminatedPodsSelector {
        selector: Option<String>,
        #[source]
        source: kube::Error,
    },
    #[error("reading whether the worker serves jobset.x-k8s.io/v1alpha2 (API discovery): {0}")]
    Discovery(#[source] kube::Error),
}
