//! The webhook's flags: where it listens, and where its certificate comes
//! from — two files, or a Secret the manager keeps
//! (`webhook/rotation.rs`).

use std::net::SocketAddr;
use std::path::PathBuf;

use jobrelay_process::flags::listen_address;

/// The mutating admission webhook that gives queued Jobs jobrelay's
/// `spec.managedBy`; see docs/kueue.md.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("webhook_certificate")
    .args(["webhook_tls_cert", "webhook_certificate_secret"])
    .multiple(false))]
pub struct WebhookFlags {
    /// Address of the admission webhook (HTTPS, POST /mutate-batch-v1-job):
    /// a Job created with a Kueue queue label and no `spec.managedBy`, whose
    /// ClusterQueue lists an AdmissionCheck of jobrelay's, gets
    /// `spec.managedBy: jobrelay.dev/manager`. Unset: not served. Needs a
    /// certificate: files (--webhook-tls-cert) or one the manager keeps
    /// (--webhook-certificate-secret).
    #[arg(long, env = "JOBRELAY_WEBHOOK_ADDR", requires = "webhook_certificate", value_parser = listen_address)]
    pub webhook_addr: Option<SocketAddr>,

    /// The webhook's serving certificate (PEM, may hold the chain); its
    /// names must cover the Service or URL the API server calls. Changed
    /// files are loaded without a restart.
    #[arg(long, env = "JOBRELAY_WEBHOOK_TLS_CERT", requires = "webhook_tls_key")]
    pub webhook_tls_cert: Option<PathBuf>,

    /// The private key of `--webhook-tls-cert` (PEM).
    #[arg(long, env = "JOBRELAY_WEBHOOK_TLS_KEY")]
    pub webhook_tls_key: Option<PathBuf>,

    /// A Secret in the manager's namespace (--lease-namespace) where the
    /// manager keeps a CA and the webhook's serving certificate of its own:
    /// made by the leader when missing, made again before they expire, and
    /// its CA written into --webhook-configuration's caBundle.
    #[arg(
        long,
        env = "JOBRELAY_WEBHOOK_CERTIFICATE_SECRET",
        requires_all = ["webhook_configuration", "webhook_names"]
    )]
    pub webhook_certificate_secret: Option<String>,

    /// The MutatingWebhookConfiguration whose webhooks call this one, given
    /// the CA of --webhook-certificate-secret.
    #[arg(long, env = "JOBRELAY_WEBHOOK_CONFIGURATION")]
    pub webhook_configuration: Option<String>,

    /// The DNS names and IP addresses the API server calls the webhook by,
    /// comma-separated, for --webhook-certificate-secret's certificate
    /// (e.g. `jobrelay-manager-webhook.jobrelay-system.svc`).
    #[arg(long, env = "JOBRELAY_WEBHOOK_NAMES", value_delimiter = ',')]
    pub webhook_names: Vec<String>,
}

/// Where the webhook's serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookCertificate {
    /// Two files, read again when they change.
    Files { cert: PathBuf, key: PathBuf },
    /// A Secret the manager keeps, and the configuration it gives its CA.
    Kept {
        secret: String,
        configuration: String,
        names: Vec<String>,
    },
}

impl WebhookFlags {
    /// The certificate the flags name, if the webhook is served.
    pub fn certificate(&self) -> Option<WebhookCertificate> {
        self.webhook_addr?;
        if let (Some(cert), Some(key)) = (&self.webhook_tls_cert, &self.webhook_tls_key) {
            return Some(WebhookCertificate::Files {
                cert: cert.clone(),
                key: key.clone(),
            });
        }
        Some(WebhookCertificate::Kept {
            secret: self.webhook_certificate_secret.clone()?,
            configuration: self.webhook_configuration.clone()?,
            names: self.webhook_names.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, parse};

    #[test]
    fn the_webhook_is_off_unless_an_address_and_its_certificate_are_given() {
        let args = parse(&[]);
        assert_eq!(args.webhook.webhook_addr, None);
        assert_eq!(args.webhook.certificate(), None);
        let args = parse(&[
            "--webhook-addr",
            "127.0.0.1:9443",
            "--webhook-tls-cert",
            "/tls/tls.crt",
            "--webhook-tls-key",
            "/tls/tls.key",
        ]);
        assert_eq!(args.webhook.webhook_addr.map(|a| a.port()), Some(9443));
        assert_eq!(
            args.webhook.certificate(),
            Some(WebhookCertificate::Files {
                cert: "/tls/tls.crt".into(),
                key: "/tls/tls.key".into()
            })
        );
        let refused = |extra: &[&str]| {
            let mut argv = vec![
                "jobrelay-manager",
                "--origin",
                "o",
                "--insecure-plaintext",
                "--webhook-addr",
                "127.0.0.1:9443",
            ];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).expect_err("refused").to_string()
        };
        let error = refused(&[]);
        assert!(
            error.contains("--webhook-tls-cert") && error.contains("--webhook-certificate-secret"),
            "{error}"
        );
        let error = refused(&["--webhook-tls-cert", "/tls/tls.crt"]);
        assert!(error.contains("--webhook-tls-key"), "{error}");
        let error = refused(&["--webhook-certificate-secret", "certs"]);
        assert!(error.contains("--webhook-configuration"), "{error}");
        let error = refused(&[
            "--webhook-tls-cert",
            "/c",
            "--webhook-tls-key",
            "/k",
            "--webhook-certificate-secret",
            "certs",
            "--webhook-configuration",
            "hook",
            "--webhook-names",
            "a",
        ]);
        assert!(error.contains("cannot be used with"), "one source: {error}");
    }

    #[test]
    fn a_kept_certificate_names_its_secret_configuration_and_names() {
        let args = parse(&[
            "--webhook-addr",
            "127.0.0.1:9443",
            "--webhook-certificate-secret",
            "jobrelay-manager-webhook-certs",
            "--webhook-configuration",
            "jobrelay-manager-webhook",
            "--webhook-names",
            "jobrelay-manager-webhook.jobrelay-system.svc,127.0.0.1",
        ]);
        assert_eq!(
            args.webhook.certificate(),
            Some(WebhookCertificate::Kept {
                secret: "jobrelay-manager-webhook-certs".into(),
                configuration: "jobrelay-manager-webhook".into(),
                names: vec![
                    "jobrelay-manager-webhook.jobrelay-system.svc".into(),
                    "127.0.0.1".into()
                ],
            })
        );
    }
}
