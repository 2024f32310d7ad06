//! The flags of jobrelay's aggregated API: the logs of relayed Jobs, read
//! through their workers' agents (`visibility/`).

use std::net::SocketAddr;

use jobrelay_process::flags::listen_address;

/// jobrelay's aggregated API (`visibility.jobrelay.dev`); see
/// docs/operations.md.
#[derive(Debug, clap::Args)]
pub struct VisibilityFlags {
    /// Address of jobrelay's aggregated API (HTTPS), which the API server
    /// calls through an APIService: `kubectl jobrelay logs` and `kubectl
    /// get --raw /apis/visibility.jobrelay.dev/v1alpha1/namespaces/<ns>/jobs/<name>/log`
    /// read a relayed Job's Pod logs through its worker's agent. Served by
    /// the leader only. Unset: not served.
    #[arg(
        long,
        env = "JOBRELAY_VISIBILITY_ADDR",
        requires_all = ["visibility_certificate_secret", "visibility_api_service", "visibility_names"],
        value_parser = listen_address
    )]
    pub visibility_addr: Option<SocketAddr>,

    /// A Secret in the manager's namespace (--lease-namespace) where the
    /// manager keeps a CA and the API's serving certificate: made when
    /// missing, made again before they expire, its CA written into
    /// --visibility-api-service's caBundle.
    #[arg(long, env = "JOBRELAY_VISIBILITY_CERTIFICATE_SECRET")]
    pub visibility_certificate_secret: Option<String>,

    /// The APIService the API server reaches this API by
    /// (`v1alpha1.visibility.jobrelay.dev`), given the CA.
    #[arg(long, env = "JOBRELAY_VISIBILITY_API_SERVICE")]
    pub visibility_api_service: Option<String>,

    /// The DNS names the API server calls the API by, comma-separated
    /// (e.g. `jobrelay-manager-visibility.jobrelay-system.svc`).
    #[arg(long, env = "JOBRELAY_VISIBILITY_NAMES", value_delimiter = ',')]
    pub visibility_names: Vec<String>,
}
