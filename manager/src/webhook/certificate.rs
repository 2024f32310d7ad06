//! When the webhook's own certificate is made anew, and what the API server
//! is told to trust: pure decisions over what the Secret holds, for
//! [`super::rotation`] to carry out.
//!
//! The manager keeps a CA of its own (ten years) and a serving certificate
//! it signs (one year). The serving certificate is made again 90 days before
//! it expires, or when it does not cover the names asked for or was not
//! signed by the CA; the CA a year before it expires, so no serving
//! certificate outlives its CA. The API server trusts every CA of the
//! bundle: the current one, and each earlier one until it expires, so a
//! replica still serving the old certificate is trusted while the new one
//! reaches every replica.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

const DAY: u64 = 24 * 60 * 60;
/// How long a CA the manager makes is valid.
pub const CA_VALIDITY: Duration = Duration::from_secs(3650 * DAY);
/// How long a serving certificate is valid (never past its CA).
pub const SERVING_VALIDITY: Duration = Duration::from_secs(365 * DAY);
/// A serving certificate is made anew once it has less than this left.
pub const RENEW_SERVING_BEFORE: Duration = Duration::from_secs(90 * DAY);
/// A CA is made anew once it has less than this left: more than a serving
/// certificate's life.
pub const RENEW_CA_BEFORE: Duration = Duration::from_secs(400 * DAY);

/// What the Secret's certificates say, in seconds since the epoch.
#[derive(Debug, Clone, PartialEq)]
pub struct Validity {
    /// When the current CA expires.
    pub ca_not_after: i64,
    /// When the serving certificate expires.
    pub serving_not_after: i64,
    /// The DNS names and IP addresses the serving certificate covers.
    pub serving_names: Vec<String>,
    /// Whether the current CA signed the serving certificate.
    pub signed_by_ca: bool,
}

/// What to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Nothing: the certificate is good.
    Keep,
    /// A serving certificate, signed by the CA the Secret holds.
    Serving,
    /// A CA and a serving certificate signed by it.
    NewCa,
}

/// What to make, `now`, for a Secret holding `found` (`None`: no Secret,
/// or one that cannot be read), to serve `names`.
pub fn plan(now: i64, found: Option<&Validity>, names: &[String]) -> Plan {
    let Some(found) = found else {
        return Plan::NewCa;
    };
    let left = |not_after: i64| Duration::from_secs(not_after.saturating_sub(now).max(0) as u64);
    if left(found.ca_not_after) < RENEW_CA_BEFORE {
        return Plan::NewCa;
    }
    let covered: BTreeSet<&String> = found.serving_names.iter().collect();
    let wanted: BTreeSet<&String> = names.iter().collect();
    if !found.signed_by_ca
        || left(found.serving_not_after) < RENEW_SERVING_BEFORE
        || covered != wanted
    {
        return Plan::Serving;
    }
    Plan::Keep
}

/// The CAs the API server is to trust: `current` first, then each earlier
/// one of `earlier` (PEM, with its expiry) not yet expired `now`, each once.
pub fn bundle(current: &str, earlier: &[(String, i64)], now: i64) -> String {
    let mut seen = BTreeSet::from([current.trim()]);
    let mut bundle = format!("{}\n", current.trim());
    for (pem, not_after) in earlier {
        if *not_after > now && seen.insert(pem.trim()) {
            bundle.push_str(pem.trim());
            bundle.push('\n');
        }
    }
    bundle
}

/// The strategic merge patch that gives every webhook of a configuration
/// `bundle` as its `caBundle`, given each webhook's name and the bundle it
/// holds now (`None`: none); `None` when all hold it already.
pub fn bundle_patch(webhooks: &[(String, Option<Vec<u8>>)], bundle: &[u8]) -> Option<Value> {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(bundle);
    let patched: Vec<Value> = webhooks
        .iter()
        .filter(|(_, held)| held.as_deref() != Some(bundle))
        .map(|(name, _)| json!({"name": name, "clientConfig": {"caBundle": encoded}}))
        .collect();
    (!patched.is_empty()).then(|| json!({"webhooks": patched}))
}

/// The merge patch that gives an APIService holding `held` the CA
/// `bundle`; `None` when it holds it already.
pub fn api_service_patch(held: Option<&[u8]>, bundle: &[u8]) -> Option<Value> {
    use base64::Engine;
    if held == Some(bundle) {
        return None;
    }
    let encoded = base64::engine::general_purpose::STANDARD.encode(bundle);
    Some(json!({"spec": {"caBundle": encoded, "insecureSkipTLSVerify": false}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;
    const DAYS: i64 = DAY as i64;

    fn names() -> Vec<String> {
        vec!["hook.jobrelay-system.svc".into(), "127.0.0.1".into()]
    }

    fn good() -> Validity {
        Validity {
            ca_not_after: NOW + 3000 * DAYS,
            serving_not_after: NOW + 300 * DAYS,
            serving_names: names(),
            signed_by_ca: true,
        }
    }

    #[rustfmt::skip]
    #[test]
    fn what_is_made_for_each_state_of_the_secret() {
        let cases: [(&str, Option<Validity>, Plan); 9] = [
            ("no Secret, or none that reads",        None,                                                             Plan::NewCa),
            ("a good certificate",                   Some(good()),                                                     Plan::Keep),
            ("the same names in another order",      Some(Validity { serving_names: names().into_iter().rev().collect(), ..good() }), Plan::Keep),
            ("serving expires in 91 days",           Some(Validity { serving_not_after: NOW + 91 * DAYS, ..good() }), Plan::Keep),
            ("serving expires in 89 days",           Some(Validity { serving_not_after: NOW + 89 * DAYS, ..good() }), Plan::Serving),
            ("serving expired",                      Some(Validity { serving_not_after: NOW - DAYS, ..good() }),      Plan::Serving),
            ("serving for other names",              Some(Validity { serving_names: vec!["old.svc".into()], ..good() }), Plan::Serving),
            ("serving not signed by the CA",         Some(Validity { signed_by_ca: false, ..good() }),                 Plan::Serving),
            ("CA expires within 400 days",           Some(Validity { ca_not_after: NOW + 399 * DAYS, ..good() }),      Plan::NewCa),
        ];
        for (case, found, expected) in cases {
            assert_eq!(plan(NOW, found.as_ref(), &names()), expected, "{case}");
        }
    }

    #[test]
    fn an_expired_ca_is_made_anew_not_kept() {
        let found = Validity {
            ca_not_after: NOW - DAYS,
            ..good()
        };
        assert_eq!(plan(NOW, Some(&found), &names()), Plan::NewCa);
    }

    #[test]
    fn the_bundle_keeps_earlier_cas_until_they_expire() {
        let earlier = [
            ("OLD".to_string(), NOW + DAYS),
            ("GONE".to_string(), NOW - 1),
            ("NEW".to_string(), NOW + 10 * DAYS),
        ];
        assert_eq!(bundle("NEW\n", &earlier, NOW), "NEW\nOLD\n");
        assert_eq!(bundle("NEW", &[], NOW), "NEW\n");
    }

    #[test]
    fn an_api_service_is_patched_only_when_it_trusts_another_ca() {
        let patch = api_service_patch(None, b"CA\n").unwrap();
        assert_eq!(patch["spec"]["caBundle"], "Q0EK");
        assert_eq!(patch["spec"]["insecureSkipTLSVerify"], false);
        assert!(api_service_patch(Some(b"old"), b"CA\n").is_some());
        assert_eq!(api_service_patch(Some(b"CA\n"), b"CA\n"), None);
    }

    #[test]
    fn only_webhooks_without_the_bundle_are_patched_by_name() {
        let bundle = b"CA\n".to_vec();
        let hook = |name: &str, held: Option<&[u8]>| (name.to_string(), held.map(<[u8]>::to_vec));
        assert_eq!(bundle_patch(&[hook("a", Some(&bundle))], &bundle), None);
        let patch = bundle_patch(
            &[
                hook("a", Some(&bundle)),
                hook("b", None),
                hook("c", Some(b"OLD")),
            ],
            &bundle,
        );
        assert_eq!(
            patch,
            Some(json!({"webhooks": [
                {"name": "b", "clientConfig": {"caBundle": "Q0EK"}},
                {"name": "c", "clientConfig": {"caBundle": "Q0EK"}},
            ]}))
        );
    }
}
