//! What the Relay demands of an agent's client certificate, judged inside
//! the TLS handshake: a chain to the configured CA, within its validity,
//! made for client authentication (the clientAuth extended key usage, named
//! explicitly), and naming a DNS subject alternative name — the agent's
//! identity. A peer whose certificate fails any of these never gets to send
//! a byte of gRPC; the handshake fails with an alert and the manager counts
//! the refusal under the reason [`CertificateRefusal::as_str`] gives.

use std::sync::Arc;

use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, OtherError, SignatureScheme,
};
use rustls_pki_types::{CertificateDer, UnixTime};

/// Why a client certificate was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CertificateRefusal {
    #[error("the client certificate has expired")]
    Expired,
    #[error("the client certificate is not valid yet")]
    NotYetValid,
    /// Not signed by the configured CA, or otherwise invalid.
    #[error("the client certificate does not chain to the client CA")]
    Untrusted,
    /// Not made for client authentication.
    #[error("the client certificate does not carry the clientAuth extended key usage")]
    NoClientAuth,
    /// Valid, but names no DNS subject alternative name.
    #[error("the client certificate has no DNS subject alternative name")]
    NoIdentity,
}

impl CertificateRefusal {
    /// A label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            CertificateRefusal::Expired => "certificate_expired",
            CertificateRefusal::NotYetValid => "certificate_not_yet_valid",
            CertificateRefusal::Untrusted => "certificate_untrusted",
            CertificateRefusal::NoClientAuth => "certificate_without_client_auth",
            CertificateRefusal::NoIdentity => "certificate_without_identity",
        }
    }
}

/// What the Relay reads from an end-entity certificate that chains to its CA.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertificateFacts {
    /// The extended key usage extension is present and names clientAuth.
    pub client_auth: bool,
    /// The DNS names of its subject alternative names.
    pub dns_names: Vec<String>,
}

/// Whether a certificate that chains to the CA may identify an agent.
pub fn judge(facts: &CertificateFacts) -> Result<(), CertificateRefusal> {
    if !facts.client_auth {
        return Err(CertificateRefusal::NoClientAuth);
    }
    if facts.dns_names.is_empty() {
        return Err(CertificateRefusal::NoIdentity);
    }
    Ok(())
}

/// The certificate refusal a failed handshake's error stands for; `None`
/// when the handshake failed for something other than the certificate
/// (none presented, a protocol error).
pub fn refusal_of(error: &rustls::Error) -> Option<CertificateRefusal> {
    let rustls::Error::InvalidCertificate(error) = error else {
        return None;
    };
    Some(match error {
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            CertificateRefusal::Expired
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            CertificateRefusal::NotYetValid
        }
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            CertificateRefusal::NoClientAuth
        }
        CertificateError::Other(OtherError(other)) => other
            .downcast_ref::<CertificateRefusal>()
            .copied()
            .unwrap_or(CertificateRefusal::Untrusted),
        _ => CertificateRefusal::Untrusted,
    })
}

/// Reads [`CertificateFacts`] from a DER certificate (none from one that
/// does not parse).
pub fn facts(cert: &CertificateDer<'_>) -> CertificateFacts {
    use x509_parser::extensions::GeneralName;
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert.as_ref()) else {
        return CertificateFacts::default();
    };
    let client_auth = matches!(parsed.extended_key_usage(), Ok(Some(eku)) if eku.value.client_auth);
    let dns_names = match parsed.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|name| match name {
                GeneralName::DNSName(dns) => Some(dns.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    CertificateFacts {
        client_auth,
        dns_names,
    }
}

/// The handshake's verifier: webpki's chain, validity and signature checks
/// against the CA loaded with it, then [`judge`].
#[derive(Debug)]
pub(crate) struct InHandshake(pub(crate) Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for InHandshake {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.0.verify_client_cert(end_entity, intermediates, now)?;
        judge(&facts(end_entity)).map_err(|refusal| {
            rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                refusal,
            ))))
        })?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
#[path = "client_cert_tests.rs"]
mod tests;
