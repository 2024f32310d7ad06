//! How each test cluster's API server is started (its flags) and reached
//! (its kubeconfig).

use std::path::Path;

use crate::certs::Pki;
use crate::cluster::Error;

/// The worker whose API server refuses streamed lists (`WatchList` off, as
/// on Kubernetes 1.33 by default), so every run has an agent on each kind of
/// initial list: streamed on the others, paged here.
pub const PAGED_LISTS_ONLY: &str = "worker-2";

/// The kube-apiserver flags of cluster `name`, listening on `port`, its
/// state under `dir`, where it writes its audit log.
pub(crate) fn apiserver_args(
    name: &str,
    port: u16,
    etcd_url: &str,
    dir: &Path,
    pki: &Pki,
) -> Result<Vec<String>, Error> {
    let sa_key = pki.service_account_key.display();
    let sa_public = pki.service_account_public_key.display();
    let audit = crate::cluster::audit::flags(dir)?;
    let paged_only = match name == PAGED_LISTS_ONLY {
        true => vec!["--feature-gates=WatchList=false".to_string()],
        false => Vec::new(),
    };
    let args = vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--etcd-prefix=/clusters/{name}"),
        format!("--secure-port={port}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--allow-privileged=true".into(),
        "--authorization-mode=RBAC".into(),
        format!("--client-ca-file={}", pki.ca_cert.display()),
        format!("--tls-cert-file={}", pki.serving_cert.display()),
        format!("--tls-private-key-file={}", pki.serving_key.display()),
        format!("--service-account-issuer=https://127.0.0.1:{port}"),
        format!("--service-account-key-file={sa_public}"),
        format!("--service-account-signing-key-file={sa_key}"),
        format!("--cert-dir={}", dir.join("certs").display()),
        "--endpoint-reconciler-type=none".into(),
        // A Service-backed webhook (the chart's) is called at its
        // endpoints' addresses, which the host reaches (the real nodes share
        // its network); its ClusterIP nothing routes without kube-proxy.
        "--enable-aggregator-routing=true".into(),
        // The front proxy that calls aggregated APIs (jobrelay's logs) with
        // the caller in headers, on a connection with its own certificate.
        format!(
            "--requestheader-client-ca-file={}",
            pki.front_proxy_ca_cert.display()
        ),
        format!(
            "--requestheader-allowed-names={}",
            crate::certs::FRONT_PROXY_CLIENT
        ),
        "--requestheader-username-headers=X-Remote-User".into(),
        "--requestheader-group-headers=X-Remote-Group".into(),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
        format!(
            "--proxy-client-cert-file={}",
            pki.front_proxy_client_cert.display()
        ),
        format!(
            "--proxy-client-key-file={}",
            pki.front_proxy_client_key.display()
        ),
        // To a real node's kubelet (`kubectl logs`, exec): as admin, at the
        // address it reports (its name resolves nowhere).
        format!("--kubelet-client-certificate={}", pki.admin_cert.display()),
        format!("--kubelet-client-key={}", pki.admin_key.display()),
        "--kubelet-preferred-address-types=InternalIP,Hostname".into(),
        // Without the node-lifecycle controller nothing would lift the
        // not-ready taint this plugin puts on every new Node.
        "--disable-admission-plugins=TaintNodesByCondition".into(),
        "--enable-priority-and-fairness=false".into(),
        "--profiling=false".into(),
    ];
    Ok(args.into_iter().chain(audit).chain(paged_only).collect())
}

pub(crate) fn write_kubeconfig(
    path: &Path,
    name: &str,
    server: &str,
    pki: &Pki,
) -> Result<(), Error> {
    let text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: {name}-admin
  user:
    client-certificate: {cert}
    client-key: {key}
contexts:
- name: {name}
  context:
    cluster: {name}
    user: {name}-admin
current-context: {name}
",
        ca = pki.ca_cert.display(),
        cert = pki.admin_cert.display(),
        key = pki.admin_key.display(),
    );
    std::fs::write(path, text).map_err(|e| Error::Io(path.display().to_string(), e))
}
