//! A release's manifests installed on a test cluster: its CRDs applied
//! server-side, and its webhook configurations registered under prefixed
//! names, each webhook pointing by URL at the controller process on
//! loopback. What differs between controllers (a CRD's conversion webhook,
//! which webhooks to keep and how to scope them) is a closure of the caller.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::certs::RelayCa;
use crate::relay::registration::install_crd;

/// A controller's webhook server as the API server reaches it: by URL on
/// loopback, trusted through the CA that issued its serving certificate.
#[derive(Debug, Clone)]
pub struct WebhookServer {
    base: String,
    ca_bundle: Value,
}

impl WebhookServer {
    /// The server on `127.0.0.1:port`, serving a certificate of `ca`.
    pub fn on_loopback(port: u16, ca: &RelayCa) -> anyhow::Result<WebhookServer> {
        Ok(WebhookServer {
            base: format!("https://127.0.0.1:{port}"),
            ca_bundle: serde_json::to_value(ByteString(ca.ca_pem.clone().into_bytes()))?,
        })
    }

    /// A webhook `clientConfig` reaching `path` on the server.
    pub fn client_config(&self, path: &str) -> Value {
        json!({"url": format!("{}{path}", self.base), "caBundle": self.ca_bundle})
    }
}

/// Applies every CRD file of `dir` server-side, in file name order, each
/// after `change` has had its say, and waits until each is established.
pub async fn install_crds(
    client: &kube::Client,
    dir: &Path,
    change: impl Fn(&mut Value),
) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| dir.display().to_string())?
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        let mut crd: Value =
            serde_yaml_ng::from_str(&text).with_context(|| file.display().to_string())?;
        change(&mut crd);
        let name = crd["metadata"]["name"]
            .as_str()
            .context("CRD without a name")?
            .to_string();
        install_crd(&crds, &name, &crd)
            .await
            .with_context(|| format!("installing CRD {name}"))?;
    }
    Ok(())
}

/// Registers the webhook configurations of `file` (the release's
/// `config/components/webhook/manifests.yaml`) server-side as
/// `field_manager`, each named with `prefix` before its own name. Each
/// webhook reaches `server` by URL at its service path, then `rewrite`
/// keeps it (changed or not) or drops it.
pub async fn register_webhooks(
    client: &kube::Client,
    file: &Path,
    prefix: &str,
    field_manager: &str,
    server: &WebhookServer,
    rewrite: impl Fn(&str, Value) -> Option<Value>,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file).with_context(|| file.display().to_string())?;
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let config: Value = serde::Deserialize::deserialize(document)?;
        let (kind, name, config) = registration(config, prefix, server, &rewrite);
        let params = PatchParams::apply(field_manager).force();
        match kind.as_str() {
            "MutatingWebhookConfiguration" => {
                let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
                api.patch(&name, &params, &Patch::Apply(&config)).await?;
            }
            "ValidatingWebhookConfiguration" => {
                let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
                api.patch(&name, &params, &Patch::Apply(&config)).await?;
            }
            other => anyhow::bail!("unexpected {other} in {}", file.display()),
        }
    }
    Ok(())
}

/// One webhook configuration of a release as it is registered: its kind,
/// its name (`prefix` before the release's), and the configuration whose
/// webhooks reach `server` by URL at their service path, each then passed
/// to `rewrite` with that path, which keeps it (changed or not) or drops it.
/// Webhooks without a service path are dropped.
pub(crate) fn registration(
    mut config: Value,
    prefix: &str,
    server: &WebhookServer,
    rewrite: impl Fn(&str, Value) -> Option<Value>,
) -> (String, String, Value) {
    let kind = config["kind"].as_str().unwrap_or_default().to_string();
    let name = format!(
        "{prefix}{}",
        config["metadata"]["name"].as_str().unwrap_or_default()
    );
    config["metadata"]["name"] = json!(name);
    let webhooks: Vec<Value> = config["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|hook| {
            let path = hook["clientConfig"]["service"]["path"].as_str()?;
            let mut hook = hook.clone();
            hook["clientConfig"] = server.client_config(path);
            rewrite(path, hook)
        })
        .collect();
    config["webhooks"] = Value::Array(webhooks);
    (kind, name, config)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A server at `https://127.0.0.1:1` with the bundle `Q0E=`.
    pub(crate) fn server() -> WebhookServer {
        WebhookServer {
            base: "https://127.0.0.1:1".into(),
            ca_bundle: json!("Q0E="),
        }
    }

    #[test]
    fn webhooks_are_renamed_reached_by_url_and_kept_as_the_rewrite_says() {
        let config = json!({
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [
                {"name": "a", "clientConfig": {"service": {"name": "svc", "path": "/validate-a"}}},
                {"name": "b", "clientConfig": {"service": {"name": "svc", "path": "/validate-b"}}},
                {"name": "c", "clientConfig": {"url": "https://elsewhere"}},
            ],
        });
        let (kind, name, config) = registration(config, "x-", &server(), |path, hook| {
            (path != "/validate-b").then_some(hook)
        });
        assert_eq!(kind, "ValidatingWebhookConfiguration");
        assert_eq!(name, "x-validating-webhook-configuration");
        assert_eq!(config["metadata"]["name"], name);
        let hooks = config["webhooks"].as_array().expect("webhooks");
        assert_eq!(hooks.len(), 1, "{hooks:?}");
        assert_eq!(hooks[0]["name"], "a");
        assert_eq!(
            hooks[0]["clientConfig"],
            json!({"url": "https://127.0.0.1:1/validate-a", "caBundle": "Q0E="})
        );
    }
}
