//! Whom the logs API trusts to say who the caller is: the API server's
//! front proxy, as the API server publishes it in the ConfigMap
//! `kube-system/extension-apiserver-authentication` — the CA that signs the
//! proxy's client certificate, the names that certificate may have, and the
//! headers that carry the caller. Read from the ConfigMap's data here, pure.

use std::collections::BTreeMap;

use super::request::Headers;

/// The ConfigMap the API server publishes its front proxy's settings in.
pub const CONFIG_MAP: (&str, &str) = ("kube-system", "extension-apiserver-authentication");

/// The front proxy's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontProxy {
    /// The CA bundle (PEM) that signs the proxy's client certificate.
    pub ca: String,
    /// The common names the proxy's certificate may have; empty: any the
    /// CA signed.
    pub allowed_names: Vec<String>,
    pub headers: Headers,
}

/// Why the ConfigMap gives no front proxy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoFrontProxy {
    #[error(
        "the API server publishes no front-proxy CA (requestheader-client-ca-file in ConfigMap kube-system/extension-apiserver-authentication): it runs without --requestheader-client-ca-file, so it cannot call an aggregated API"
    )]
    NoCa,
    #[error("ConfigMap kube-system/extension-apiserver-authentication, key {key}: {why}")]
    Unreadable { key: &'static str, why: String },
}

/// Reads the front proxy's settings from the ConfigMap's `data`.
pub fn read(data: &BTreeMap<String, String>) -> Result<FrontProxy, NoFrontProxy> {
    let ca = data
        .get("requestheader-client-ca-file")
        .filter(|ca| !ca.trim().is_empty())
        .ok_or(NoFrontProxy::NoCa)?
        .clone();
    let list = |key: &'static str| -> Result<Option<Vec<String>>, NoFrontProxy> {
        let Some(text) = data.get(key).filter(|t| !t.trim().is_empty()) else {
            return Ok(None);
        };
        serde_json::from_str(text)
            .map(Some)
            .map_err(|e| NoFrontProxy::Unreadable {
                key,
                why: format!("not a JSON list of strings: {e}"),
            })
    };
    let defaults = Headers::default();
    Ok(FrontProxy {
        ca,
        allowed_names: list("requestheader-allowed-names")?.unwrap_or_default(),
        headers: Headers {
            user: list("requestheader-username-headers")?.unwrap_or(defaults.user),
            group: list("requestheader-group-headers")?.unwrap_or(defaults.group),
            extra_prefix: list("requestheader-extra-headers-prefix")?
                .unwrap_or(defaults.extra_prefix),
            uid: list("requestheader-uid-headers")?.unwrap_or_default(),
        },
    })
}

/// Whether a client certificate the CA signed, with `common_name`, is the
/// front proxy's.
pub fn allowed(proxy: &FrontProxy, common_name: Option<&str>) -> bool {
    proxy.allowed_names.is_empty()
        || common_name.is_some_and(|cn| proxy.allowed_names.iter().any(|n| n == cn))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_api_servers_settings_are_read() {
        let proxy = read(&data(&[
            (
                "requestheader-client-ca-file",
                "-----BEGIN CERTIFICATE-----\n",
            ),
            ("requestheader-allowed-names", r#"["front-proxy-client"]"#),
            ("requestheader-username-headers", r#"["X-Remote-User"]"#),
            ("requestheader-group-headers", r#"["X-Remote-Group"]"#),
            (
                "requestheader-extra-headers-prefix",
                r#"["X-Remote-Extra-"]"#,
            ),
            ("requestheader-uid-headers", r#"["X-Remote-Uid"]"#),
        ]))
        .unwrap();
        assert_eq!(proxy.allowed_names, vec!["front-proxy-client"]);
        assert_eq!(proxy.headers.uid, vec!["X-Remote-Uid"]);
        assert_eq!(proxy.headers.user, vec!["X-Remote-User"]);
    }

    #[test]
    fn without_a_ca_there_is_no_front_proxy() {
        assert_eq!(read(&data(&[])), Err(NoFrontProxy::NoCa));
        let only_clients = data(&[("client-ca-file", "pem")]);
        assert_eq!(read(&only_clients), Err(NoFrontProxy::NoCa));
    }

    #[test]
    fn a_list_that_is_not_json_is_named() {
        let broken = data(&[
            ("requestheader-client-ca-file", "pem"),
            ("requestheader-allowed-names", "front-proxy-client"),
        ]);
        let Err(NoFrontProxy::Unreadable { key, .. }) = read(&broken) else {
            panic!("read a broken list");
        };
        assert_eq!(key, "requestheader-allowed-names");
    }

    #[test]
    fn missing_header_names_are_kubernetes_defaults() {
        let proxy = read(&data(&[("requestheader-client-ca-file", "pem")])).unwrap();
        assert_eq!(proxy.headers, Headers::default());
        assert!(proxy.allowed_names.is_empty());
    }

    #[test]
    fn the_proxys_certificate_must_have_an_allowed_name_if_any_is_listed() {
        let mut proxy = read(&data(&[("requestheader-client-ca-file", "pem")])).unwrap();
        assert!(allowed(&proxy, None));
        proxy.allowed_names = vec!["front-proxy-client".into()];
        assert!(allowed(&proxy, Some("front-proxy-client")));
        assert!(!allowed(&proxy, Some("alice")));
        assert!(!allowed(&proxy, None));
    }
}
