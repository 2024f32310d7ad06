//! `WorkerCluster.spec.certificate`: which client certificates may speak for
//! a cluster, beyond the client CA vouching for one that names it. Pinning
//! the agent's public key cuts off a stolen key the day its cluster is
//! given a new one; pinning the issuing CA's key keeps every other CA of
//! the bundle from speaking for the cluster. Each field is a list, so a
//! rotation can allow the old and the new for a while.

use base64::Engine;
use jobrelay_process::PeerCertificate;
use jobrelay_process::peer_certificate::{Sha256Digest, hex};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a pinned digest looks like: the SHA-256 as 64 hex digits, or as
/// base64 (44 characters, one `=`).
pub const DIGEST_PATTERN: &str = "^([0-9a-fA-F]{64}|[A-Za-z0-9+/]{43}=)$";

/// Digests a field may list.
const MAX_DIGESTS: usize = 16;

/// The agent certificates a WorkerCluster accepts. Both lists empty (or
/// the field absent): any certificate of the client CA naming the cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CertificatePin {
    /// The SHA-256 of the agent certificate's SubjectPublicKeyInfo (DER),
    /// hex or base64: `openssl x509 -in tls.crt -noout -pubkey | openssl
    /// pkey -pubin -outform der | openssl dgst -sha256`. When set, the
    /// agent's key must be one of these.
    #[serde(
        rename = "publicKeySHA256",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(schema_with = "digests_schema")]
    pub public_key_sha256: Vec<String>,
    /// The SHA-256 of the SubjectPublicKeyInfo of the CA certificate that
    /// signs the agent's (its direct issuer: an intermediate, or a CA of
    /// the client-CA bundle), in the same form. When set, the agent's
    /// certificate must be signed by one of these keys.
    #[serde(
        rename = "issuerPublicKeySHA256",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(schema_with = "digests_schema")]
    pub issuer_public_key_sha256: Vec<String>,
}

fn digests_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "maxItems": MAX_DIGESTS,
        "items": {"type": "string", "pattern": DIGEST_PATTERN},
    })
}

/// A [`CertificatePin`], parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pin {
    pub public_keys: Vec<Sha256Digest>,
    pub issuers: Vec<Sha256Digest>,
}

/// A pinned digest that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "WorkerCluster {cluster}: spec.certificate.{field}[{index}]: {value:?} is neither a SHA-256 in hex (64 digits) nor in base64 (44 characters)"
)]
pub struct InvalidPin {
    pub cluster: String,
    pub field: &'static str,
    pub index: usize,
    pub value: String,
}

/// Why a certificate may not speak for a cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinRefusal {
    #[error("{0}; every session is refused until it is fixed")]
    Invalid(InvalidPin),
    #[error(
        "WorkerCluster {cluster} pins its agent's certificate (spec.certificate), but the session has no client certificate"
    )]
    NoCertificate { cluster: String },
    #[error(
        "the client certificate's public key (SHA-256 {presented}) is none of WorkerCluster {cluster}'s spec.certificate.publicKeySHA256"
    )]
    PublicKey { cluster: String, presented: String },
    #[error(
        "the client certificate's issuer (public key SHA-256 {presented}) is none of WorkerCluster {cluster}'s spec.certificate.issuerPublicKeySHA256"
    )]
    Issuer { cluster: String, presented: String },
}

impl PinRefusal {
    /// A label for metrics and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            PinRefusal::Invalid(_) => "certificate_pin_invalid",
            _ => "certificate_pin_mismatch",
        }
    }
}

/// Reads a digest in hex or base64.
pub fn parse_digest(text: &str) -> Option<Sha256Digest> {
    let bytes = match text.len() {
        64 => (0..64)
            .step_by(2)
            .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()?,
        44 => base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()?,
        _ => return None,
    };
    bytes.try_into().ok()
}

/// `cluster`'s pin, parsed: `None` when it pins nothing.
pub fn parse(cluster: &str, spec: Option<&CertificatePin>) -> Result<Option<Pin>, InvalidPin> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let digests = |field: &'static str, texts: &[String]| {
        texts
            .iter()
            .enumerate()
            .map(|(index, text)| {
                parse_digest(text).ok_or_else(|| InvalidPin {
                    cluster: cluster.into(),
                    field,
                    index,
                    value: text.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let pin = Pin {
        public_keys: digests("publicKeySHA256", &spec.public_key_sha256)?,
        issuers: digests("issuerPublicKeySHA256", &spec.issuer_public_key_sha256)?,
    };
    Ok(Some(pin).filter(|pin| !pin.public_keys.is_empty() || !pin.issuers.is_empty()))
}

/// May `certificate` speak for `cluster`, pinned as `pin` says? `Ok(true)`
/// when it matches a pin, `Ok(false)` when nothing is pinned.
pub fn judge(
    cluster: &str,
    pin: Result<Option<Pin>, InvalidPin>,
    certificate: Option<&PeerCertificate>,
) -> Result<bool, PinRefusal> {
    let Some(pin) = pin.map_err(PinRefusal::Invalid)? else {
        return Ok(false);
    };
    let Some(certificate) = certificate else {
        return Err(PinRefusal::NoCertificate {
            cluster: cluster.into(),
        });
    };
    if !pin.public_keys.is_empty() && !pin.public_keys.contains(&certificate.public_key_sha256) {
        return Err(PinRefusal::PublicKey {
            cluster: cluster.into(),
            presented: hex(&certificate.public_key_sha256),
        });
    }
    let issuer = certificate.issuer_public_key_sha256;
    if !pin.issuers.is_empty() && !issuer.is_some_and(|issuer| pin.issuers.contains(&issuer)) {
        return Err(PinRefusal::Issuer {
            cluster: cluster.into(),
            presented: issuer.map_or_else(|| "unknown".into(), |issuer| hex(&issuer)),
        });
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Sha256Digest = [0xaa; 32];
    const B: Sha256Digest = [0xbb; 32];
    const CA: Sha256Digest = [0xca; 32];

    fn certificate(key: Sha256Digest, issuer: Option<Sha256Digest>) -> PeerCertificate {
        PeerCertificate {
            not_after: 1_900_000_000,
            public_key_sha256: key,
            issuer_public_key_sha256: issuer,
        }
    }

    fn pin(keys: &[Sha256Digest], issuers: &[Sha256Digest]) -> Result<Option<Pin>, InvalidPin> {
        Ok(Some(Pin {
            public_keys: keys.to_vec(),
            issuers: issuers.to_vec(),
        }))
    }

    fn spec(keys: &[&str], issuers: &[&str]) -> CertificatePin {
        CertificatePin {
            public_key_sha256: keys.iter().map(|k| k.to_string()).collect(),
            issuer_public_key_sha256: issuers.iter().map(|k| k.to_string()).collect(),
        }
    }

    #[test]
    fn a_digest_is_read_from_hex_of_either_case_or_base64() {
        let hex_lower = "aa".repeat(32);
        assert_eq!(parse_digest(&hex_lower), Some(A));
        assert_eq!(parse_digest(&hex_lower.to_uppercase()), Some(A));
        let base64 = base64::engine::general_purpose::STANDARD.encode(A);
        assert_eq!(base64.len(), 44);
        assert_eq!(parse_digest(&base64), Some(A));
        for bad in ["", "aa", &"zz".repeat(32), &"a".repeat(44), "sha256:aa"] {
            assert_eq!(parse_digest(bad), None, "{bad}");
        }
        let pattern = regex_lite::Regex::new(DIGEST_PATTERN).unwrap();
        assert!(pattern.is_match(&hex_lower) && pattern.is_match(&base64));
    }

    #[test]
    fn an_empty_or_absent_pin_pins_nothing_and_a_bad_digest_names_the_cluster_and_field() {
        assert_eq!(parse("worker-a", None), Ok(None));
        assert_eq!(parse("worker-a", Some(&spec(&[], &[]))), Ok(None));
        let parsed = parse("worker-a", Some(&spec(&[&"bb".repeat(32)], &[]))).unwrap();
        assert_eq!(parsed.unwrap().public_keys, [B]);
        let error = parse("worker-a", Some(&spec(&[&"aa".repeat(32)], &["", "x"])))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("WorkerCluster worker-a: spec.certificate.issuerPublicKeySHA256[0]"),
            "{error}"
        );
    }

    #[test]
    fn without_a_pin_any_certificate_passes() {
        assert_eq!(judge("worker-a", Ok(None), None), Ok(false));
        assert_eq!(
            judge("worker-a", Ok(None), Some(&certificate(A, None))),
            Ok(false)
        );
    }

    #[test]
    fn a_pinned_key_passes_and_any_other_is_refused() {
        let presented = certificate(A, Some(CA));
        assert_eq!(
            judge("worker-a", pin(&[B, A], &[]), Some(&presented)),
            Ok(true)
        );
        let refused = judge("worker-a", pin(&[B], &[]), Some(&presented)).unwrap_err();
        assert_eq!(refused.reason(), "certificate_pin_mismatch");
        assert_eq!(
            refused.to_string(),
            format!(
                "the client certificate's public key (SHA-256 {}) is none of WorkerCluster worker-a's spec.certificate.publicKeySHA256",
                "aa".repeat(32)
            )
        );
    }

    #[test]
    fn a_pinned_issuer_passes_its_certificates_and_refuses_another_cas_or_an_unknown_one() {
        assert_eq!(
            judge("worker-a", pin(&[], &[CA]), Some(&certificate(A, Some(CA)))),
            Ok(true)
        );
        let other_ca = judge("worker-a", pin(&[], &[CA]), Some(&certificate(A, Some(B))));
        assert!(matches!(other_ca, Err(PinRefusal::Issuer { .. })));
        let unknown = judge("worker-a", pin(&[], &[CA]), Some(&certificate(A, None)));
        assert!(unknown.unwrap_err().to_string().contains("SHA-256 unknown"));
        // Both pinned: both must match.
        let both = judge("worker-a", pin(&[A], &[CA]), Some(&certificate(A, Some(B))));
        assert!(matches!(both, Err(PinRefusal::Issuer { .. })));
    }

    #[test]
    fn a_pin_refuses_a_session_without_a_certificate_and_an_invalid_pin_refuses_every_session() {
        let none = judge("worker-a", pin(&[A], &[]), None).unwrap_err();
        assert!(matches!(none, PinRefusal::NoCertificate { .. }));
        let invalid = InvalidPin {
            cluster: "worker-a".into(),
            field: "publicKeySHA256",
            index: 0,
            value: "x".into(),
        };
        let refused = judge("worker-a", Err(invalid), Some(&certificate(A, None))).unwrap_err();
        assert_eq!(refused.reason(), "certificate_pin_invalid");
        assert!(
            refused
                .to_string()
                .ends_with("every session is refused until it is fixed"),
            "{refused}"
        );
    }
}
