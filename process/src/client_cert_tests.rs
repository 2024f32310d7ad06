//! One test per way a client certificate is judged.

use super::*;

fn facts_of(client_auth: bool, names: &[&str]) -> CertificateFacts {
    CertificateFacts {
        client_auth,
        dns_names: names.iter().map(|n| n.to_string()).collect(),
    }
}

#[test]
fn a_client_auth_certificate_naming_a_cluster_is_accepted() {
    assert_eq!(judge(&facts_of(true, &["worker-a"])), Ok(()));
}

#[test]
fn a_certificate_without_client_auth_is_refused() {
    assert_eq!(
        judge(&facts_of(false, &["worker-a"])),
        Err(CertificateRefusal::NoClientAuth)
    );
}

#[test]
fn a_certificate_without_a_dns_name_is_refused() {
    assert_eq!(
        judge(&facts_of(true, &[])),
        Err(CertificateRefusal::NoIdentity)
    );
}

#[test]
fn handshake_errors_are_classified_by_what_was_wrong_with_the_certificate() {
    let invalid = |e| rustls::Error::InvalidCertificate(e);
    let cases = [
        (
            invalid(CertificateError::Expired),
            Some(CertificateRefusal::Expired),
        ),
        (
            invalid(CertificateError::NotValidYet),
            Some(CertificateRefusal::NotYetValid),
        ),
        (
            invalid(CertificateError::UnknownIssuer),
            Some(CertificateRefusal::Untrusted),
        ),
        (
            invalid(CertificateError::BadSignature),
            Some(CertificateRefusal::Untrusted),
        ),
        (
            invalid(CertificateError::InvalidPurpose),
            Some(CertificateRefusal::NoClientAuth),
        ),
        (
            invalid(CertificateError::Other(OtherError(Arc::new(
                CertificateRefusal::NoIdentity,
            )))),
            Some(CertificateRefusal::NoIdentity),
        ),
        (rustls::Error::NoCertificatesPresented, None),
    ];
    for (error, expected) in cases {
        assert_eq!(refusal_of(&error), expected, "{error}");
    }
}

#[test]
fn facts_are_read_from_the_certificate() {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["worker-a".into()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.self_signed(&key).unwrap();
    assert_eq!(facts(cert.der()), facts_of(true, &["worker-a"]));

    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    assert_eq!(
        facts(params.self_signed(&key).unwrap().der()),
        facts_of(false, &["worker-a"])
    );
    // No extended key usage at all: webpki would take it for any use;
    // the Relay does not.
    params.extended_key_usages = vec![];
    assert_eq!(
        facts(params.self_signed(&key).unwrap().der()),
        facts_of(false, &["worker-a"])
    );
}
