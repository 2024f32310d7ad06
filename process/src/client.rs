//! The agent's side: a tonic client configuration that presents the agent's
//! certificate and trusts only the CA that signed the manager's.

use tonic::transport::{Certificate, ClientTlsConfig, Identity};

use crate::files::Pem;

/// TLS for dialling the manager with these files.
pub fn client_config(pem: &Pem) -> ClientTlsConfig {
    ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&pem.ca))
        .identity(Identity::from_pem(&pem.cert, &pem.key))
}
