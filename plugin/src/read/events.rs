//! The Events on one object, as `kubectl describe` finds them: by the
//! object's UID.

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};

use crate::errors::from_kube;

/// The Events in `namespace` about the object with `uid`.
pub async fn about(
    client: &kube::Client,
    namespace: &str,
    uid: &str,
) -> anyhow::Result<Vec<Event>> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().fields(&format!("involvedObject.uid={uid}"));
    Ok(api.list(&params).await.map_err(from_kube)?.items)
}
