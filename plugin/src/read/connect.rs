//! A client for the manager cluster, found as kubectl finds it:
//! `--kubeconfig`, else `KUBECONFIG` (a list of files, merged), else
//! `~/.kube/config`, else the Pod's ServiceAccount; `--context` or the
//! current context; `-n`, else the context's namespace, else `default`.

use std::path::Path;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The manager cluster, and the namespace the user means.
pub struct Connection {
    pub client: kube::Client,
    pub namespace: String,
}

/// Connects as kubectl would with these flags.
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    namespace: Option<&str>,
) -> anyhow::Result<Connection> {
    let options = KubeConfigOptions {
        context: context.map(String::from),
        ..KubeConfigOptions::default()
    };
    let config = match (kubeconfig, context) {
        (Some(path), _) => {
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .with_context(|| format!("cannot use the kubeconfig {}", path.display()))?
        }
        (None, Some(context)) => kube::Config::from_kubeconfig(&options)
            .await
            .with_context(|| format!("cannot use the kubeconfig's context {context}"))?,
        (None, None) => kube::Config::infer().await.context(
            "no kubeconfig found (--kubeconfig, KUBECONFIG, ~/.kube/config) and not in a cluster",
        )?,
    };
    let namespace = namespace
        .map(String::from)
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = kube::Client::try_from(config).context("cannot make a client for the cluster")?;
    Ok(Connection { client, namespace })
}
