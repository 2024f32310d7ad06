//! The WorkerClusters, read as plain objects into the plugin's own view
//! of them.

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};

use crate::errors::{from_kube, is_not_found};
use crate::view::cluster::{GROUP, KIND, PLURAL, VERSION, WorkerCluster};

/// Every WorkerCluster, by name.
pub async fn list(client: &kube::Client) -> anyhow::Result<Vec<WorkerCluster>> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let objects = match api.list(&ListParams::default()).await {
        Ok(objects) => objects,
        Err(error) if is_not_found(&error) => anyhow::bail!(
            "this cluster serves no {PLURAL}.{GROUP}/{VERSION}: is it jobrelay's manager cluster, with its chart installed?"
        ),
        Err(error) => return Err(from_kube(error)),
    };
    let mut clusters = objects
        .items
        .into_iter()
        .map(|object| Ok(serde_json::from_value(serde_json::to_value(object)?)?))
        .collect::<anyhow::Result<Vec<WorkerCluster>>>()?;
    clusters.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(clusters)
}
