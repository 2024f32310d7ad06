//! This manager installation's identity towards agents: the UID of its
//! cluster's `kube-system` namespace. It outlives every manager Pod, Lease
//! and upgrade of the installation, and differs for a copy restored into
//! another cluster, which is what agents must tell apart (see
//! [`jobrelay_proto::instance`]).

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;

use crate::error::Error;

/// The namespace whose UID names the installation.
const NAMESPACE: &str = "kube-system";

/// Reads the instance from the API server.
pub async fn discover(client: &kube::Client) -> Result<String, Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = namespaces.get(NAMESPACE).await.map_err(Error::Instance)?;
    namespace.metadata.uid.ok_or_else(|| {
        Error::Instance(kube::Error::Service(
            format!("namespace {NAMESPACE} has no UID").into(),
        ))
    })
}
