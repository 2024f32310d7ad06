//! The metrics every jobrelay process has, whatever its part: which build it
//! runs (`build_info`), until when its TLS certificates are valid, and how
//! long its Kubernetes API server takes to answer. They live for the whole
//! process — the Kubernetes client and the certificate files are set up
//! apart from the registry each binary builds — and [`register`] adds them
//! to that registry.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// The revision the binaries were built from, when the build said
/// (`JOBRELAY_REVISION` in the environment of `cargo build`).
const REVISION: Option<&str> = option_env!("JOBRELAY_REVISION");

/// What `jobrelay_build_info` says.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildInfo {
    pub version: String,
    pub revision: String,
}

/// One kind of request to the Kubernetes API server, and how it ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KubeApiRequest {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, …
    pub verb: String,
    /// Plural, with its group unless core, and subresource:
    /// `pods`, `jobs.batch/status`; a non-resource request's path.
    pub resource: String,
    /// The HTTP status code, or `error` when no response came.
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ByCertificate {
    /// The flag that names the file, without its dashes: `tls-cert`,
    /// `client-ca`, `manager-ca`.
    pub certificate: String,
}

type Seconds = Family<KubeApiRequest, Histogram, fn() -> Histogram>;

/// Upper bounds of the API latency buckets, in seconds: 5 ms to a minute.
const API_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0,
];

fn api_seconds() -> Histogram {
    Histogram::new(API_BUCKETS)
}

static KUBE_API_SECONDS: LazyLock<Seconds> =
    LazyLock::new(|| Family::new_with_constructor(api_seconds));

static CERTIFICATE_EXPIRY: LazyLock<Family<ByCertificate, Gauge>> = LazyLock::new(Family::default);

/// Adds the process's metrics to `registry` (whose prefix, `jobrelay`,
/// comes first in their names).
pub fn register(registry: &mut Registry) {
    let build = Family::<BuildInfo, Gauge>::default();
    build
        .get_or_create(&build_info(env!("CARGO_PKG_VERSION"), REVISION))
        .set(1);
    registry.register(
        "build_info",
        "Always 1; the version and source revision of this binary",
        build,
    );
    registry.register(
        "certificate_expiry_timestamp_seconds",
        "When this process's TLS certificate (tls-cert) or the CA it trusts (client-ca, manager-ca) expires, as last read from its file, in seconds since the epoch; the earliest of the file's certificates",
        CERTIFICATE_EXPIRY.clone(),
    );
    registry.register(
        "kube_api_request_duration_seconds",
        "Requests to this process's Kubernetes API server until their response headers, by verb, resource and status code (a watch until it started)",
        KUBE_API_SECONDS.clone(),
    );
}

/// The process's own `process_*` metrics, without jobrelay's prefix.
static OS: LazyLock<Registry> = LazyLock::new(|| {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(crate::os_metrics::OsCollector));
    registry
});

/// The OpenMetrics text a scrape of `/metrics` gets: `registry` (a binary's
/// metrics, these among them) and the process's `process_*` metrics.
pub fn render(registry: &Registry) -> String {
    use prometheus_client::encoding::text::{encode_eof, encode_registry};
    let mut text = String::new();
    let encoded = encode_registry(&mut text, registry)
        .and_then(|()| encode_registry(&mut text, &OS))
        .and_then(|()| encode_eof(&mut text));
    if let Err(error) = encoded {
        tracing::warn!(%error, "cannot encode the metrics");
    }
    text
}

/// The labels of `jobrelay_build_info` for `version` built from `revision`.
pub fn build_info(version: &str, revision: Option<&str>) -> BuildInfo {
    BuildInfo {
        version: version.to_string(),
        revision: revision
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .unwrap_or("unknown")
            .to_string(),
    }
}

/// Notes a request to the API server that `took` so long.
pub(crate) fn kube_api_request(request: KubeApiRequest, took: Duration) {
    KUBE_API_SECONDS
        .get_or_create(&request)
        .observe(took.as_secs_f64());
}

/// Notes when the certificate just read from the file `flag` names expires.
pub fn certificate_read(flag: &str, certificate: &[u8]) {
    if let Some(expiry) = earliest_expiry(certificate) {
        let labels = ByCertificate {
            certificate: flag.trim_start_matches('-').to_string(),
        };
        CERTIFICATE_EXPIRY.get_or_create(&labels).set(expiry);
    }
}

/// The earliest `notAfter` of the PEM certificates in `pem`, in seconds
/// since the epoch: a chain is only as valid as its first certificate to
/// expire. `None` if none can be read.
pub fn earliest_expiry(pem: &[u8]) -> Option<i64> {
    CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .filter_map(|der| {
            let (_, parsed) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
            Some(parsed.validity().not_after.timestamp())
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(name: &str, year: i32) -> String {
        let key = rcgen::KeyPair::generate().expect("a key");
        let mut params = rcgen::CertificateParams::new(vec![name.into()]).expect("params");
        params.not_after = rcgen::date_time_ymd(year, 1, 2);
        params.self_signed(&key).expect("a certificate").pem()
    }

    #[test]
    fn the_revision_is_unknown_unless_the_build_named_one() {
        assert_eq!(build_info("0.1.0", None).revision, "unknown");
        assert_eq!(build_info("0.1.0", Some(" ")).revision, "unknown");
        let info = build_info("0.1.0", Some("3f2a9c1\n"));
        assert_eq!(
            (info.version.as_str(), info.revision.as_str()),
            ("0.1.0", "3f2a9c1")
        );
    }

    #[test]
    fn a_chain_expires_with_its_first_certificate_to_expire() {
        // 2031-01-02T00:00:00Z and 2030-01-02T00:00:00Z.
        let chain = certificate("worker-a", 2031) + &certificate("intermediate", 2030);
        assert_eq!(earliest_expiry(chain.as_bytes()), Some(1_893_542_400));
        assert_eq!(earliest_expiry(b"not a certificate"), None);
    }

    #[test]
    fn the_process_metrics_render_with_the_prefix_and_the_os_ones_without() {
        certificate_read("tls-cert", certificate("worker-a", 2030).as_bytes());
        certificate_read("--manager-ca", certificate("ca", 2031).as_bytes());
        kube_api_request(
            KubeApiRequest {
                verb: "list".into(),
                resource: "jobs.batch".into(),
                code: "200".into(),
            },
            Duration::from_millis(30),
        );
        let mut registry = Registry::with_prefix("jobrelay");
        register(&mut registry);
        let text = render(&registry);
        for line in [
            format!(
                "jobrelay_build_info{{version=\"{}\",revision=\"",
                env!("CARGO_PKG_VERSION")
            ),
            "jobrelay_certificate_expiry_timestamp_seconds{certificate=\"tls-cert\"} 1893542400\n"
                .into(),
            "jobrelay_certificate_expiry_timestamp_seconds{certificate=\"manager-ca\"} 1925078400\n"
                .into(),
            "jobrelay_kube_api_request_duration_seconds_bucket{le=\"0.05\",verb=\"list\",resource=\"jobs.batch\",code=\"200\"} 1\n"
                .into(),
            "\nprocess_resident_memory_bytes ".into(),
            "\nprocess_cpu_seconds_total ".into(),
        ] {
            assert!(text.contains(&line), "missing {line:?} in:\n{text}");
        }
    }
}
