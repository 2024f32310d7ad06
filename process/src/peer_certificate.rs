//! What the Relay keeps of a peer's verified client certificate for the
//! life of its connection: when it expires, and the SHA-256 digests of its
//! public key and of its issuer's, which a WorkerCluster may pin. Read once
//! the handshake has verified the chain, so the digests are of keys the
//! client CA vouched for.

use rustls_pki_types::CertificateDer;
use sha2::{Digest, Sha256};
use x509_parser::certificate::X509Certificate;

/// A SHA-256 digest.
pub type Sha256Digest = [u8; 32];

/// The facts of a verified client certificate that outlive its handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCertificate {
    /// Its notAfter, in seconds since the epoch.
    pub not_after: i64,
    /// SHA-256 over its SubjectPublicKeyInfo (DER): what
    /// `openssl x509 -pubkey -noout | openssl pkey -pubin -outform der |
    /// openssl dgst -sha256` prints.
    pub public_key_sha256: Sha256Digest,
    /// SHA-256 over the SubjectPublicKeyInfo of the CA certificate that
    /// signed it (an intermediate the peer presented, or a CA of the client
    /// CA bundle); `None` when no candidate verifies its signature.
    pub issuer_public_key_sha256: Option<Sha256Digest>,
}

/// Reads the facts of `chain`'s end-entity certificate (the peer's chain as
/// presented, end entity first); the issuer is looked for among the
/// presented intermediates first, then in `client_cas`, and must verify its
/// signature. `None` when the chain is empty or does not parse.
pub fn read(
    chain: &[CertificateDer<'_>],
    client_cas: &[CertificateDer<'_>],
) -> Option<PeerCertificate> {
    let (_, leaf) = x509_parser::parse_x509_certificate(chain.first()?.as_ref()).ok()?;
    let issuer = chain
        .iter()
        .skip(1)
        .chain(client_cas)
        .filter_map(|der| x509_parser::parse_x509_certificate(der.as_ref()).ok())
        .map(|(_, candidate)| candidate)
        .find(|candidate| signed(&leaf, candidate));
    Some(PeerCertificate {
        not_after: leaf.validity().not_after.timestamp(),
        public_key_sha256: public_key_sha256(&leaf),
        issuer_public_key_sha256: issuer.as_ref().map(public_key_sha256),
    })
}

/// The common name of `chain`'s end-entity certificate, if it has one.
pub fn common_name(chain: &[CertificateDer<'_>]) -> Option<String> {
    let (_, leaf) = x509_parser::parse_x509_certificate(chain.first()?.as_ref()).ok()?;
    let name = leaf.subject().iter_common_name().next()?;
    name.as_str().ok().map(str::to_string)
}

/// Did `issuer` sign `leaf`? Its subject is `leaf`'s issuer and its key
/// verifies `leaf`'s signature.
fn signed(leaf: &X509Certificate<'_>, issuer: &X509Certificate<'_>) -> bool {
    leaf.issuer().as_raw() == issuer.subject().as_raw()
        && leaf.verify_signature(Some(issuer.public_key())).is_ok()
}

fn public_key_sha256(certificate: &X509Certificate<'_>) -> Sha256Digest {
    Sha256::digest(certificate.public_key().raw).into()
}

/// A digest as lowercase hex, the way it is shown and may be pinned.
pub fn hex(digest: &Sha256Digest) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };

    fn ca(name: &str) -> (Issuer<'static, KeyPair>, CertificateDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let der = params.self_signed(&key).unwrap().der().clone();
        (Issuer::new(params, key), der)
    }

    fn client(issuer: &Issuer<'_, KeyPair>, key: &KeyPair) -> CertificateDer<'static> {
        let mut params = CertificateParams::new(vec!["worker-a".to_string()]).unwrap();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.not_after = rcgen::date_time_ymd(2031, 1, 1);
        params.signed_by(key, issuer).unwrap().der().clone()
    }

    fn spki_sha256(key: &KeyPair) -> Sha256Digest {
        Sha256::digest(rcgen::PublicKeyData::subject_public_key_info(key)).into()
    }

    #[test]
    fn the_digests_are_of_the_keys_and_the_expiry_is_not_after() {
        let (issuer, ca_der) = ca("relay CA");
        let key = KeyPair::generate().unwrap();
        let leaf = client(&issuer, &key);
        let read = read(&[leaf], &[ca_der]).unwrap();
        assert_eq!(read.public_key_sha256, spki_sha256(&key));
        assert_eq!(
            read.issuer_public_key_sha256,
            Some(spki_sha256(issuer.key()))
        );
        assert_eq!(read.not_after, 1_924_992_000, "2031-01-01T00:00:00Z");
    }

    #[test]
    fn the_common_name_is_the_end_entitys() {
        let (_, front_proxy) = ca("front-proxy-client");
        let (_, other) = ca("other");
        let chain = [front_proxy, other];
        assert_eq!(common_name(&chain).as_deref(), Some("front-proxy-client"));
        assert_eq!(common_name(&[]), None);
    }

    #[test]
    fn the_issuer_is_the_ca_whose_key_signed_not_one_with_the_same_name() {
        let (_, impostor_der) = ca("relay CA");
        let (issuer, ca_der) = ca("relay CA");
        let leaf = client(&issuer, &KeyPair::generate().unwrap());
        let read = read(std::slice::from_ref(&leaf), &[impostor_der.clone(), ca_der]).unwrap();
        assert_eq!(
            read.issuer_public_key_sha256,
            Some(spki_sha256(issuer.key()))
        );
        let unknown = super::read(&[leaf], &[impostor_der]).unwrap();
        assert_eq!(unknown.issuer_public_key_sha256, None);
    }

    #[test]
    fn a_presented_intermediate_is_the_issuer_before_any_bundled_ca() {
        let (root, root_der) = ca("root");
        let intermediate_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "intermediate");
        let intermediate_der = params
            .signed_by(&intermediate_key, &root)
            .unwrap()
            .der()
            .clone();
        let intermediate = Issuer::new(params, intermediate_key);
        let leaf = client(&intermediate, &KeyPair::generate().unwrap());
        let read = read(&[leaf, intermediate_der], &[root_der]).unwrap();
        assert_eq!(
            read.issuer_public_key_sha256,
            Some(spki_sha256(intermediate.key()))
        );
    }

    #[test]
    fn nothing_is_read_from_no_certificate() {
        assert_eq!(read(&[], &[]), None);
        assert_eq!(read(&[CertificateDer::from(vec![1, 2, 3])], &[]), None);
    }

    #[test]
    fn hex_is_lowercase_and_two_digits_a_byte() {
        let mut digest = [0u8; 32];
        digest[0] = 0xab;
        digest[31] = 0x01;
        let text = hex(&digest);
        assert_eq!(text.len(), 64);
        assert!(text.starts_with("ab00") && text.ends_with("0001"), "{text}");
    }
}
