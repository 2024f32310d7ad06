//! The webhook's own certificates as the Secret holds them — `ca.crt` (the
//! bundle the API server trusts, the current CA first), `ca.key`, `tls.crt`,
//! `tls.key` — read back into what [`super::certificate::plan`] decides on,
//! and made anew when it says so.

use std::collections::BTreeMap;
use std::time::Duration;

use jobrelay_process::Pem;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::certificate::{self, CA_VALIDITY, Plan, SERVING_VALIDITY, Validity};

/// The Secret's entries.
const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const CERT: &str = "tls.crt";
const KEY: &str = "tls.key";

/// The certificates of one Secret, PEM.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The CAs the API server is to trust, the current one first.
    pub bundle: String,
    pub ca_key: String,
    pub cert: String,
    pub key: String,
}

impl Stored {
    /// What `secret` holds, if it holds all four entries as text.
    pub fn of_secret(secret: &Secret) -> Option<Stored> {
        let data = secret.data.as_ref()?;
        let text = |entry: &str| String::from_utf8(data.get(entry)?.0.clone()).ok();
        Some(Stored {
            bundle: text(CA_CERT)?,
            ca_key: text(CA_KEY)?,
            cert: text(CERT)?,
            key: text(KEY)?,
        })
    }

    /// The Secret `name` holding these.
    pub fn to_secret(&self, name: &str, resource_version: Option<String>) -> Secret {
        let entry =
            |key: &str, value: &str| (key.to_string(), ByteString(value.as_bytes().to_vec()));
        Secret {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                resource_version,
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_string(),
                    "jobrelay-manager".to_string(),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(BTreeMap::from([
                entry(CA_CERT, &self.bundle),
                entry(CA_KEY, &self.ca_key),
                entry(CERT, &self.cert),
                entry(KEY, &self.key),
            ])),
            ..Secret::default()
        }
    }

    /// What the certificates say; `None` where one cannot be read.
    pub fn validity(&self) -> Option<Validity> {
        let cas = ders(&self.bundle);
        let ca = X509Certificate::from_der(cas.first()?).ok()?.1;
        let serving = ders(&self.cert);
        let serving = X509Certificate::from_der(serving.first()?).ok()?.1;
        let names = serving
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|san| san.value.general_names.iter().filter_map(name_of).collect())
            .unwrap_or_default();
        Some(Validity {
            ca_not_after: ca.validity().not_after.timestamp(),
            serving_not_after: serving.validity().not_after.timestamp(),
            serving_names: names,
            signed_by_ca: serving.verify_signature(Some(ca.public_key())).is_ok(),
        })
    }

    /// The serving certificate and its key, for the endpoint.
    pub fn serving(&self) -> Pem {
        Pem {
            cert: self.cert.clone().into_bytes(),
            key: self.key.clone().into_bytes(),
            ca: Vec::new(),
        }
    }
}

/// The DER of each certificate of `pem`.
fn ders(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .collect()
}

fn name_of(name: &GeneralName) -> Option<String> {
    match name {
        GeneralName::DNSName(dns) => Some(dns.to_string()),
        GeneralName::IPAddress(bytes) => match bytes.len() {
            4 => <[u8; 4]>::try_from(*bytes)
                .ok()
                .map(|b| std::net::IpAddr::from(b).to_string()),
            16 => <[u8; 16]>::try_from(*bytes)
                .ok()
                .map(|b| std::net::IpAddr::from(b).to_string()),
            _ => None,
        },
        _ => None,
    }
}

/// Each CA of a bundle, PEM, with its expiry; the current one first.
fn cas(bundle: &str) -> Vec<(String, i64)> {
    const END: &str = "-----END CERTIFICATE-----";
    bundle
        .split_inclusive(END)
        .filter(|block| block.ends_with(END))
        .filter_map(|block| {
            let block = format!("{}\n", block.trim());
            let der = ders(&block).into_iter().next()?;
            let (_, parsed) = X509Certificate::from_der(&der).ok()?;
            Some((block, parsed.validity().not_after.timestamp()))
        })
        .collect()
}

fn at(seconds: i64) -> Result<time::OffsetDateTime, rcgen::Error> {
    time::OffsetDateTime::from_unix_timestamp(seconds).map_err(|_| rcgen::Error::Time)
}

fn later(now: i64, by: Duration) -> i64 {
    now.saturating_add(i64::try_from(by.as_secs()).unwrap_or(i64::MAX))
}

/// A CA named after `subject`, valid from `now`: its certificate and key.
fn new_ca(subject: &str, now: i64) -> Result<(String, String), rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("{subject} CA"));
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = at(now - 60)?;
    params.not_after = at(later(now, CA_VALIDITY))?;
    Ok((params.self_signed(&key)?.pem(), key.serialize_pem()))
}

/// What `plan` says to make, `now`, from `stored` (the CA it keeps, for
/// [`Plan::Serving`]), for `names`, the CA named after `service`. `None`
/// for [`Plan::Keep`], or a serving certificate asked of a CA that cannot
/// be read.
pub fn issue(
    plan: Plan,
    stored: Option<&Stored>,
    names: &[String],
    subject: &str,
    now: i64,
) -> Result<Option<Stored>, rcgen::Error> {
    let (ca_pem, ca_key, bundle) = match (plan, stored) {
        (Plan::Keep, _) | (Plan::Serving, None) => return Ok(None),
        (Plan::Serving, Some(stored)) => match cas(&stored.bundle).into_iter().next() {
            Some((current, _)) => (current, stored.ca_key.clone(), stored.bundle.clone()),
            None => return Ok(None),
        },
        (Plan::NewCa, _) => {
            let (ca, key) = new_ca(subject, now)?;
            let earlier = stored.map(|s| cas(&s.bundle)).unwrap_or_default();
            let bundle = certificate::bundle(&ca, &earlier, now);
            (ca, key, bundle)
        }
    };
    let ca_not_after = cas(&ca_pem)
        .first()
        .map(|(_, not_after)| *not_after)
        .ok_or(rcgen::Error::CouldNotParseCertificate)?;
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, KeyPair::from_pem(&ca_key)?)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    params.distinguished_name.push(DnType::CommonName, subject);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.not_before = at(now - 60)?;
    params.not_after = at(later(now, SERVING_VALIDITY).min(ca_not_after))?;
    let cert = params.signed_by(&key, &issuer)?.pem();
    Ok(Some(Stored {
        bundle,
        ca_key,
        cert,
        key: key.serialize_pem(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn names() -> Vec<String> {
        vec![
            "jobrelay-manager-webhook.jobrelay-system.svc".into(),
            "127.0.0.1".into(),
        ]
    }

    fn made(plan: Plan, stored: Option<&Stored>, now: i64) -> Stored {
        issue(plan, stored, &names(), "jobrelay-manager-webhook", now)
            .expect("issues")
            .expect("something made")
    }

    #[test]
    fn a_new_ca_signs_a_serving_certificate_for_the_names_that_is_then_kept() {
        let stored = made(Plan::NewCa, None, NOW);
        let validity = stored.validity().expect("reads back");
        assert!(validity.signed_by_ca);
        assert_eq!(validity.serving_names, names());
        assert_eq!(validity.ca_not_after, NOW + CA_VALIDITY.as_secs() as i64);
        assert_eq!(
            validity.serving_not_after,
            NOW + SERVING_VALIDITY.as_secs() as i64
        );
        assert_eq!(
            certificate::plan(NOW, Some(&validity), &names()),
            Plan::Keep
        );
        assert_eq!(cas(&stored.bundle).len(), 1, "one CA: {}", stored.bundle);
        let secret = stored.to_secret("certs", Some("7".into()));
        assert_eq!(Stored::of_secret(&secret), Some(stored.clone()));
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(stored.serving().cert, stored.cert.as_bytes());
    }

    #[test]
    fn a_serving_certificate_made_again_keeps_the_ca_and_its_bundle() {
        let first = made(Plan::NewCa, None, NOW);
        let later = NOW + 300 * 86_400;
        let renewed = made(Plan::Serving, Some(&first), later);
        assert_eq!(renewed.bundle, first.bundle);
        assert_eq!(renewed.ca_key, first.ca_key);
        assert_ne!(renewed.cert, first.cert);
        let validity = renewed.validity().expect("reads back");
        assert!(validity.signed_by_ca, "signed by the kept CA");
        assert_eq!(
            validity.serving_not_after,
            later + SERVING_VALIDITY.as_secs() as i64
        );
    }

    #[test]
    fn a_new_ca_is_trusted_beside_the_old_until_the_old_expires() {
        let first = made(Plan::NewCa, None, NOW);
        let second = made(Plan::NewCa, Some(&first), NOW + 10);
        let bundle = cas(&second.bundle);
        assert_eq!(bundle.len(), 2, "{}", second.bundle);
        assert_eq!(bundle[1].0, cas(&first.bundle)[0].0, "the old CA second");
        assert!(second.validity().expect("reads").signed_by_ca);
        let long_after = NOW + CA_VALIDITY.as_secs() as i64 + 100;
        let third = made(Plan::NewCa, Some(&second), long_after);
        assert_eq!(cas(&third.bundle).len(), 1, "expired CAs leave the bundle");
    }

    #[test]
    fn a_serving_certificate_never_outlives_its_ca() {
        let first = made(Plan::NewCa, None, NOW);
        let near_end = NOW + CA_VALIDITY.as_secs() as i64 - 30 * 86_400;
        let renewed = made(Plan::Serving, Some(&first), near_end);
        let validity = renewed.validity().expect("reads");
        assert_eq!(validity.serving_not_after, validity.ca_not_after);
    }

    #[test]
    fn nothing_is_made_to_keep_or_from_a_ca_that_is_not_there() {
        let none = issue(Plan::Keep, None, &names(), "x", NOW).expect("no error");
        assert_eq!(none, None);
        let none = issue(Plan::Serving, None, &names(), "x", NOW).expect("no error");
        assert_eq!(none, None);
        assert_eq!(Stored::of_secret(&Secret::default()), None);
        let garbage = Stored {
            bundle: "not a certificate".into(),
            ca_key: String::new(),
            cert: String::new(),
            key: String::new(),
        };
        assert_eq!(
            garbage.validity(),
            None,
            "read as no certificate: made anew"
        );
    }
}
