//! One test per transition of the certificate conditions.

use super::*;
use crate::clusters::certificate_pin::CertificatePin;
use crate::clusters::worker_cluster::{WorkerClusterSpec, WorkerClusterStatus};

const DAY: i64 = 24 * 60 * 60;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn certificate(not_after: Timestamp) -> PeerCertificate {
    PeerCertificate {
        not_after: not_after.as_second(),
        public_key_sha256: [0xaa; 32],
        issuer_public_key_sha256: Some([0xca; 32]),
    }
}

fn cluster(pin: Option<&[&str]>, status: Option<WorkerClusterStatus>) -> WorkerCluster {
    let mut cluster = WorkerCluster::new(
        "worker-a",
        WorkerClusterSpec {
            certificate: pin.map(|keys| CertificatePin {
                public_key_sha256: keys.iter().map(|k| k.to_string()).collect(),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    cluster.status = status;
    cluster
}

fn shown(conditions: &[Condition]) -> Vec<(String, String, String)> {
    conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
        .collect()
}

fn row(kind: &str, status: &str, reason: &str) -> (String, String, String) {
    (kind.into(), status.into(), reason.into())
}

fn record() -> AgentCertificates {
    AgentCertificates::new(Family::default())
}

#[test]
fn a_cluster_no_agent_presented_a_certificate_for_shows_nothing() {
    assert!(conditions(&cluster(None, None), None, at(0)).is_empty());
}

#[test]
fn an_accepted_certificate_shows_accepted_and_when_it_expires() {
    let seen = record();
    seen.accepted("worker-a", Some(&certificate(at(30 * DAY))), false);
    let shown_now = conditions(&cluster(None, None), seen.seen("worker-a").as_ref(), at(0));
    assert_eq!(
        shown(&shown_now),
        [
            row(CERTIFICATE_ACCEPTED, "True", "NotPinned"),
            row(CERTIFICATE_EXPIRING, "False", "ValidForMoreThanAWeek"),
        ]
    );
    assert!(shown_now[1].message.contains("2027-"), "{shown_now:?}");
    seen.accepted("worker-a", Some(&certificate(at(30 * DAY))), true);
    let pinned = conditions(&cluster(None, None), seen.seen("worker-a").as_ref(), at(0));
    assert_eq!(pinned[0].reason, "Pinned");
    assert!(pinned[0].message.contains(&"aa".repeat(32)), "{pinned:?}");
}

#[test]
fn a_certificate_is_expiring_under_seven_days_and_expired_at_its_not_after() {
    let not_after = at(10 * DAY).as_second();
    assert!(!expiry(not_after, at(3 * DAY - 1)).holds);
    assert_eq!(expiry(not_after, at(3 * DAY + 1)).reason, "ExpiresSoon");
    assert_eq!(expiry(not_after, at(10 * DAY)).reason, EXPIRED);
    assert!(expiry(not_after, at(11 * DAY)).holds);
}

#[test]
fn a_session_lasts_until_its_certificate_expires() {
    let not_after = at(90).as_second();
    assert_eq!(remaining(not_after, at(0)), Duration::from_secs(90));
    assert_eq!(remaining(not_after, at(200)), Duration::ZERO);
    let half_past = Timestamp::from_nanosecond(at(0).as_nanosecond() + 500_000_000).unwrap();
    assert_eq!(
        remaining(not_after, half_past),
        Duration::from_millis(89_500)
    );
    let year_9999 = 253_402_300_799;
    assert!(remaining(year_9999, at(0)) > Duration::from_secs(500 * 365 * DAY as u64));
}

#[test]
fn a_refused_certificate_shows_why_and_keeps_the_expiry_of_the_last_session() {
    let seen = record();
    seen.accepted("worker-a", Some(&certificate(at(30 * DAY))), true);
    seen.refused(
        "worker-a",
        Some(&certificate(at(60 * DAY))),
        PIN_MISMATCH,
        "the client certificate's public key is none of the pins".into(),
    );
    let now = conditions(&cluster(None, None), seen.seen("worker-a").as_ref(), at(0));
    assert_eq!(
        shown(&now),
        [
            row(CERTIFICATE_ACCEPTED, "False", PIN_MISMATCH),
            row(CERTIFICATE_EXPIRING, "False", "ValidForMoreThanAWeek"),
        ]
    );
    assert!(now[0].message.contains("none of the pins"));
}

#[test]
fn an_invalid_pin_shows_at_once_and_clears_when_fixed() {
    let invalid = cluster(Some(&["not-a-digest"]), None);
    let now = conditions(&invalid, None, at(0));
    assert_eq!(
        shown(&now),
        [row(CERTIFICATE_ACCEPTED, "False", INVALID_PIN)]
    );
    assert!(
        now[0]
            .message
            .contains("WorkerCluster worker-a: spec.certificate.publicKeySHA256[0]"),
        "{now:?}"
    );
    // Fixed before any agent tried again: the stale complaint goes.
    let status = WorkerClusterStatus {
        conditions: now,
        ..Default::default()
    };
    let fixed = cluster(Some(&[&"aa".repeat(32)]), Some(status));
    assert!(conditions(&fixed, None, at(1)).is_empty());
}

#[test]
fn after_a_manager_restart_the_shown_conditions_stay_until_the_agent_is_back() {
    let seen = record();
    seen.accepted("worker-a", Some(&certificate(at(3 * DAY))), false);
    let before = conditions(&cluster(None, None), seen.seen("worker-a").as_ref(), at(0));
    let status = WorkerClusterStatus {
        conditions: before.clone(),
        ..Default::default()
    };
    let restarted = conditions(&cluster(None, Some(status.clone())), None, at(5));
    assert_eq!(restarted, before);
    assert_eq!(restarted[1].reason, "ExpiresSoon");
    // The transition time holds while the status does.
    seen.accepted("worker-a", Some(&certificate(at(3 * DAY))), false);
    let back = conditions(
        &cluster(None, Some(status)),
        seen.seen("worker-a").as_ref(),
        at(9),
    );
    assert_eq!(back[1].last_transition_time, before[1].last_transition_time);
}

#[test]
fn the_expiry_metric_follows_the_latest_session_and_goes_with_its_cluster() {
    let expiry = Family::<ByCluster, Gauge>::default();
    let seen = AgentCertificates::new(expiry.clone());
    seen.accepted("worker-a", Some(&certificate(at(DAY))), false);
    seen.accepted("worker-b", Some(&certificate(at(2 * DAY))), false);
    assert_eq!(
        expiry.get_or_create(&by("worker-a")).get(),
        at(DAY).as_second()
    );
    seen.retain(|cluster| cluster == "worker-b");
    assert!(seen.seen("worker-a").is_none());
    assert!(seen.seen("worker-b").is_some());
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register("expiry", "", expiry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        !text.contains("worker-a") && text.contains("worker-b"),
        "{text}"
    );
}
