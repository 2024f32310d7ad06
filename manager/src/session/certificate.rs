//! A session's certificate beyond the handshake: at admission it must
//! match its WorkerCluster's pin (`spec.certificate`); once open, the
//! session ends when the certificate expires, or when the pin changes so
//! that it no longer matches. The agent dials again, with whatever
//! certificate its files hold by then, and is judged afresh. Every verdict
//! is recorded for the WorkerCluster's conditions.

use jobrelay_process::{Peer, PeerCertificate};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use tokio::sync::watch;
use tonic::Status;

use super::admission::Dismissal;
use super::{Ended, Sessions};
use crate::clusters::agent_certificates::{self, EXPIRED, INVALID_PIN, PIN_MISMATCH};
use crate::clusters::certificate_pin::{self, PinRefusal};
use crate::clusters::worker_cluster::WorkerCluster;

/// The refusal a pin's verdict stands for, and the condition reason.
fn refusal(refused: &PinRefusal) -> (Dismissal, &'static str) {
    let message = refused.to_string();
    match refused {
        PinRefusal::Invalid(_) => (
            Dismissal::new(refused.reason(), Status::failed_precondition(message)),
            INVALID_PIN,
        ),
        _ => (
            Dismissal::new(refused.reason(), Status::permission_denied(message)),
            PIN_MISMATCH,
        ),
    }
}

fn judge(
    registered: &WorkerCluster,
    certificate: Option<&PeerCertificate>,
) -> Result<bool, PinRefusal> {
    let cluster = registered.name_any();
    let pin = certificate_pin::parse(&cluster, registered.spec.certificate.as_ref());
    certificate_pin::judge(&cluster, pin, certificate)
}

impl Sessions {
    /// Whether `peer`'s certificate may speak for `registered`; the verdict
    /// is recorded either way.
    pub(super) fn pinned(
        &self,
        registered: &WorkerCluster,
        peer: Option<&Peer>,
    ) -> Result<(), Dismissal> {
        let cluster = registered.name_any();
        let certificate = peer.and_then(|p| p.certificate.as_ref());
        match judge(registered, certificate) {
            Ok(pinned) => {
                self.certificates.accepted(&cluster, certificate, pinned);
                Ok(())
            }
            Err(refused) => {
                let (refusal, reason) = refusal(&refused);
                self.certificates
                    .refused(&cluster, certificate, reason, refused.to_string());
                Err(refusal)
            }
        }
    }

    /// Resolves when the session of `cluster` with `certificate` must end:
    /// at the certificate's expiry, when a change of the WorkerClusters
    /// leaves its pin refusing the certificate, or when it is deleted.
    /// `clusters_changed` was taken before the session was admitted, so no
    /// change after its admission goes unjudged.
    pub(super) async fn certificate_ends(
        &self,
        cluster: &str,
        certificate: Option<PeerCertificate>,
        mut clusters_changed: watch::Receiver<()>,
    ) -> Ended {
        let expires = async {
            match &certificate {
                Some(c) => {
                    let now = Timestamp::now();
                    tokio::time::sleep(agent_certificates::remaining(c.not_after, now)).await;
                    Timestamp::from_second(c.not_after).unwrap_or(Timestamp::MAX)
                }
                None => std::future::pending().await,
            }
        };
        let refused = async {
            // Status writes change WorkerClusters too: only a new pin is
            // judged (and any at the first change, which may have come
            // between the admission and now).
            let mut judged = None;
            while clusters_changed.changed().await.is_ok() {
                let Some(registered) = self.registry.get(cluster) else {
                    return Ended::Unregistered;
                };
                if judged.as_ref() == Some(&registered.spec.certificate) {
                    continue;
                }
                judged = Some(registered.spec.certificate.clone());
                match judge(&registered, certificate.as_ref()) {
                    Ok(pinned) => self
                        .certificates
                        .accepted(cluster, certificate.as_ref(), pinned),
                    Err(refused) => {
                        let (_, reason) = refusal(&refused);
                        let message = format!("session ended: {refused}");
                        self.certificates
                            .refused(cluster, certificate.as_ref(), reason, message);
                        return Ended::CertificateRefused(refused);
                    }
                }
            }
            std::future::pending().await
        };
        tokio::select! {
            at = expires => {
                let message = format!("session ended: the client certificate expired at {at}");
                self.certificates.refused(cluster, certificate.as_ref(), EXPIRED, message);
                Ended::CertificateExpired(at)
            }
            ended = refused => ended,
        }
    }
}
