//! What the manager knows of each cluster's agent certificate: the latest
//! verdict on one it presented (accepted, refused by the cluster's pin, a
//! session ended by its expiry or a changed pin) and the certificate of its
//! latest session. Sessions record; the status writer shows it as two
//! WorkerCluster conditions, `CertificateAccepted` and `CertificateExpiring`
//! (True under [`EXPIRING_WITHIN`] of its notAfter); the metrics show that
//! expiry per cluster.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use jobrelay_process::PeerCertificate;
use jobrelay_process::peer_certificate::hex;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::clusters::ByCluster;
use crate::clusters::certificate_pin;
use crate::clusters::worker_cluster::{WorkerCluster, condition};
use crate::condition::Assessment;

/// Condition type: the latest certificate the agent presented may speak
/// for the cluster (`spec.certificate`).
pub const CERTIFICATE_ACCEPTED: &str = "CertificateAccepted";
/// Condition type: the certificate of the agent's latest session expires
/// within [`EXPIRING_WITHIN`], or has expired.
pub const CERTIFICATE_EXPIRING: &str = "CertificateExpiring";
/// How close to its expiry a certificate counts as expiring.
pub const EXPIRING_WITHIN: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The latest verdict on a certificate an agent presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertificateVerdict {
    /// A session opened with it; `pinned` when a pin matched it.
    Accepted { pinned: bool },
    /// Refused, or its session ended: a condition reason and the message.
    Refused {
        reason: &'static str,
        message: String,
    },
}

/// Condition reasons of a refusal.
pub const PIN_MISMATCH: &str = "PinMismatch";
pub const INVALID_PIN: &str = "InvalidPin";
pub const EXPIRED: &str = "Expired";

/// What is known of one cluster's agent certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateState {
    pub verdict: CertificateVerdict,
    /// The certificate the verdict is on (`None` without TLS).
    pub presented: Option<PeerCertificate>,
    /// The certificate of the latest session opened.
    pub accepted: Option<PeerCertificate>,
}

/// Every cluster's [`CertificateState`], shared by the sessions and the status writer.
pub struct AgentCertificates {
    seen: Mutex<HashMap<String, CertificateState>>,
    /// `jobrelay_agent_certificate_expiry_timestamp_seconds{cluster}`.
    expiry: Family<ByCluster, Gauge>,
}

impl AgentCertificates {
    pub fn new(expiry: Family<ByCluster, Gauge>) -> Self {
        AgentCertificates {
            seen: Mutex::default(),
            expiry,
        }
    }

    /// `cluster`'s agent opened a session with `certificate`.
    pub fn accepted(&self, cluster: &str, certificate: Option<&PeerCertificate>, pinned: bool) {
        if let Some(certificate) = certificate {
            self.expiry
                .get_or_create(&by(cluster))
                .set(certificate.not_after);
        }
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.insert(
            cluster.into(),
            CertificateState {
                verdict: CertificateVerdict::Accepted { pinned },
                presented: certificate.cloned(),
                accepted: certificate.cloned(),
            },
        );
    }

    /// `certificate` may not speak for `cluster` (any more): `reason` is
    /// the condition's, `message` says why.
    pub fn refused(
        &self,
        cluster: &str,
        certificate: Option<&PeerCertificate>,
        reason: &'static str,
        message: String,
    ) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let accepted = seen.get(cluster).and_then(|s| s.accepted.clone());
        seen.insert(
            cluster.into(),
            CertificateState {
                verdict: CertificateVerdict::Refused { reason, message },
                presented: certificate.cloned(),
                accepted,
            },
        );
    }

    pub fn seen(&self, cluster: &str) -> Option<CertificateState> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get(cluster).cloned()
    }

    /// Forgets the clusters `registered` no longer names, their metric too.
    pub fn retain(&self, registered: impl Fn(&str) -> bool) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.retain(|cluster, _| {
            let keep = registered(cluster);
            if !keep {
                self.expiry.remove(&by(cluster));
            }
            keep
        });
    }
}

fn by(cluster: &str) -> ByCluster {
    ByCluster {
        cluster: cluster.into(),
    }
}

/// The certificate conditions `cluster` should show now, given what is
/// known of its agent's certificate. A condition nothing is known for
/// keeps what the status says (the manager restarted; the agent is on its
/// way back), or is left out.
pub fn conditions(
    cluster: &WorkerCluster,
    seen: Option<&CertificateState>,
    now: Timestamp,
) -> Vec<Condition> {
    let current = cluster.status.clone().unwrap_or_default();
    let generation = cluster.metadata.generation;
    let kept = |kind: &str| cluster.condition(kind).cloned();
    let make = |kind, status, reason, message| {
        condition(&current, kind, status, reason, message, now, generation)
    };
    let pin = certificate_pin::parse(&cluster.name_any(), cluster.spec.certificate.as_ref());
    let accepted = match (pin, seen.map(|s| &s.verdict)) {
        (Err(invalid), _) => Some(make(
            CERTIFICATE_ACCEPTED,
            false,
            INVALID_PIN,
            certificate_pin::PinRefusal::Invalid(invalid).to_string(),
        )),
        (Ok(_), Some(CertificateVerdict::Accepted { pinned })) => {
            let key = seen.and_then(|s| s.presented.as_ref()).map_or_else(
                || "none: the Relay runs without TLS".into(),
                |c| hex(&c.public_key_sha256),
            );
            let (reason, message) = match pinned {
                true => (
                    "Pinned",
                    format!(
                        "the agent's certificate (public key SHA-256 {key}) matches spec.certificate"
                    ),
                ),
                false => (
                    "NotPinned",
                    format!(
                        "spec.certificate pins nothing: any certificate of the client CA naming this cluster is accepted (the agent's public key SHA-256: {key})"
                    ),
                ),
            };
            Some(make(CERTIFICATE_ACCEPTED, true, reason, message))
        }
        (Ok(_), Some(CertificateVerdict::Refused { reason, message })) => {
            Some(make(CERTIFICATE_ACCEPTED, false, reason, message.clone()))
        }
        (Ok(_), None) => kept(CERTIFICATE_ACCEPTED).filter(|c| c.reason != INVALID_PIN),
    };
    let expiring = match seen.and_then(|s| s.accepted.as_ref()) {
        Some(certificate) => {
            let expiring = expiry(certificate.not_after, now);
            Some(make(
                CERTIFICATE_EXPIRING,
                expiring.holds,
                expiring.reason,
                expiring.message,
            ))
        }
        None => kept(CERTIFICATE_EXPIRING),
    };
    accepted.into_iter().chain(expiring).collect()
}

/// Whether a certificate valid until `not_after` (seconds since the epoch)
/// counts as expiring at `now`, with the condition's reason and message.
/// The message names the date only, so it changes when the certificate does.
pub fn expiry(not_after: i64, now: Timestamp) -> Assessment {
    let until = Timestamp::from_second(not_after).unwrap_or(Timestamp::MAX);
    let left = not_after.saturating_sub(now.as_second());
    let within = EXPIRING_WITHIN.as_secs() as i64;
    if left <= 0 {
        Assessment::holds(
            EXPIRED,
            format!("the agent's certificate expired at {until}"),
        )
    } else if left < within {
        Assessment::holds(
            "ExpiresSoon",
            format!("the agent's certificate expires at {until}, within 7 days: rotate it"),
        )
    } else {
        Assessment::fails(
            "ValidForMoreThanAWeek",
            format!("the agent's certificate expires at {until}"),
        )
    }
}

/// How long a session with a certificate valid until `not_after` may last
/// from `now`.
pub fn remaining(not_after: i64, now: Timestamp) -> Duration {
    let left = i128::from(not_after) * 1_000_000_000 - now.as_nanosecond();
    // Centuries away (a certificate valid until 9999) saturates.
    Duration::from_nanos(u64::try_from(left.max(0)).unwrap_or(u64::MAX))
}

#[cfg(test)]
#[path = "agent_certificates_tests.rs"]
mod tests;
