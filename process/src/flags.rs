//! The certificate flags both binaries take, and the files they name.

use std::path::PathBuf;
use std::time::Duration;

use crate::Error;
use crate::files::PemFiles;

#[derive(Debug, Clone, clap::Args)]
pub struct CertificateFlags {
    /// This side's certificate (PEM, may hold the chain): the manager's
    /// serving certificate, or the agent's client certificate, whose DNS
    /// subject alternative name is its cluster.
    #[arg(
        long,
        env = "JOBRELAY_TLS_CERT",
        required_unless_present = "insecure_plaintext"
    )]
    pub tls_cert: Option<PathBuf>,

    /// The private key of `--tls-cert` (PEM).
    #[arg(
        long,
        env = "JOBRELAY_TLS_KEY",
        required_unless_present = "insecure_plaintext"
    )]
    pub tls_key: Option<PathBuf>,

    /// How often the certificate files are checked for changes; changed
    /// files are loaded without a restart.
    #[arg(long, env = "JOBRELAY_CERTIFICATE_RELOAD_INTERVAL", default_value = "10s", value_parser = jobrelay_proto::duration::parse)]
    pub certificate_reload_interval: Duration,
}

impl CertificateFlags {
    /// The files to read, with the CA file `ca` that `ca_flag` named; `None`
    /// when `insecure_plaintext` turns TLS off.
    pub fn files(
        &self,
        ca: Option<&PathBuf>,
        ca_flag: &'static str,
        insecure_plaintext: bool,
    ) -> Result<Option<PemFiles>, Error> {
        if insecure_plaintext {
            tracing::warn!(
                "--insecure-plaintext: no TLS, the peer is not authenticated; for loopback development only"
            );
            return Ok(None);
        }
        match (&self.tls_cert, &self.tls_key, ca) {
            (Some(cert), Some(key), Some(ca)) => Ok(Some(PemFiles {
                cert: cert.clone(),
                key: key.clone(),
                ca: ca.clone(),
                ca_flag,
            })),
            _ => Err(Error::Config(format!(
                "--tls-cert, --tls-key and {ca_flag} are required (or --insecure-plaintext for loopback development)"
            ))),
        }
    }
}

/// The flags every jobrelay process has: its certificates, its Kubernetes
/// client (which kubeconfig, what limit), where its health endpoint listens,
/// and how it logs. Names follow Kubernetes controllers' (`--kubeconfig`,
/// `--health-probe-bind-address`); earlier names stay as aliases.
#[derive(Debug, Clone, clap::Args)]
pub struct ProcessFlags {
    #[command(flatten)]
    pub certificates: CertificateFlags,

    #[command(flatten)]
    pub kube_api: crate::KubeApiFlags,

    /// The kubeconfig file of the Kubernetes API server to use (its current
    /// context). Without it: `KUBECONFIG`, then `~/.kube/config`, then the
    /// Pod's service account.
    #[arg(long, env = "JOBRELAY_KUBECONFIG", value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Address of the plaintext `grpc.health.v1.Health` service for
    /// Kubernetes `grpc:` probes: service "" is SERVING while the process
    /// runs, "jobrelay.v1.Relay" while it can do its work (the manager: its
    /// caches are synced; the agent: it holds a session and reaches its own
    /// API server).
    #[arg(
        long = "health-probe-bind-address",
        visible_alias = "health-listen",
        env = "JOBRELAY_HEALTH_LISTEN",
        default_value = "0.0.0.0:8081",
        value_parser = listen_address
    )]
    pub health_listen: std::net::SocketAddr,

    /// How log lines are written to standard error: `text`, or `json` (one
    /// object per line, with the fields of the spans it happened in). Levels
    /// come from `RUST_LOG`.
    #[arg(long, env = "JOBRELAY_LOG_FORMAT", value_enum, default_value_t)]
    pub log_format: crate::telemetry::LogFormat,
}

/// A listen address, `host:port`: as a socket address is written
/// (`10.0.0.5:8081`, `[fd00::5]:8081`), or with a bare IPv6 host, as
/// `$(POD_IP):8081` reads on an IPv6 Pod (`fd00::5:8081`: the port is what
/// follows the last colon).
pub fn listen_address(text: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(address) = text.parse() {
        return Ok(address);
    }
    let bare_v6 = text.rsplit_once(':').and_then(|(host, port)| {
        let host: std::net::Ipv6Addr = host.parse().ok()?;
        Some(std::net::SocketAddr::from((
            host,
            port.parse::<u16>().ok()?,
        )))
    });
    bare_v6.ok_or_else(|| format!("{text:?} is not host:port (an IP address and a port)"))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::telemetry::LogFormat;

    #[test]
    fn a_listen_address_may_name_a_bare_ipv6_host() {
        let read = |text| listen_address(text).map(|a| a.to_string());
        assert_eq!(read("10.0.0.5:8081"), Ok("10.0.0.5:8081".into()));
        assert_eq!(read("[fd00::5]:8081"), Ok("[fd00::5]:8081".into()));
        assert_eq!(
            read("fd00::5:8081"),
            Ok("[fd00::5]:8081".into()),
            "$(POD_IP):8081 on IPv6"
        );
        assert!(read("10.0.0.5").is_err());
        assert!(read(":8081").is_err());
        assert!(read("fd00::5:99999").is_err());
        assert!(
            read("pod.example:8081")
                .unwrap_err()
                .contains("not host:port")
        );
    }

    /// A binary's flags: the process's, and the switch the certificate
    /// flags refer to.
    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        process: ProcessFlags,
        #[arg(long)]
        insecure_plaintext: bool,
    }

    fn parse(args: &[&str]) -> Result<ProcessFlags, clap::Error> {
        Cli::try_parse_from(["test", "--insecure-plaintext"].iter().chain(args))
            .map(|cli| cli.process)
    }

    fn flags(args: &[&str]) -> ProcessFlags {
        parse(args).expect("valid flags")
    }

    #[test]
    fn logs_are_text_unless_json_is_asked_for() {
        assert_eq!(flags(&[]).log_format, LogFormat::Text);
        assert_eq!(flags(&["--log-format", "json"]).log_format, LogFormat::Json);
        assert_eq!(flags(&["--log-format=text"]).log_format, LogFormat::Text);
        let error = parse(&["--log-format", "yaml"]).expect_err("no such format");
        assert!(error.to_string().contains("--log-format"), "{error}");
    }

    #[test]
    fn the_health_address_takes_the_controller_name_and_the_old_one() {
        let default: std::net::SocketAddr = "0.0.0.0:8081".parse().expect("an address");
        assert_eq!(flags(&[]).health_listen, default);
        let addr: std::net::SocketAddr = "127.0.0.1:9440".parse().expect("an address");
        for name in ["--health-probe-bind-address", "--health-listen"] {
            assert_eq!(
                flags(&[name, "127.0.0.1:9440"]).health_listen,
                addr,
                "{name}"
            );
        }
    }

    #[test]
    fn a_kubeconfig_is_optional() {
        assert_eq!(flags(&[]).kubeconfig, None);
        assert_eq!(
            flags(&["--kubeconfig", "/etc/worker.kubeconfig"]).kubeconfig,
            Some(PathBuf::from("/etc/worker.kubeconfig"))
        );
    }
}
