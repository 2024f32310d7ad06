//! The manager's relayed Jobs.

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams};

use crate::errors::from_kube;
use crate::view::job::is_relayed;

/// The relayed Jobs in `namespace` (`None`: every namespace), by namespace
/// and name. `spec.managedBy` has no field selector, so every Job is listed
/// and the others left out here.
pub async fn relayed(client: &kube::Client, namespace: Option<&str>) -> anyhow::Result<Vec<Job>> {
    let api: Api<Job> = match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let mut jobs: Vec<Job> = api
        .list(&ListParams::default())
        .await
        .map_err(from_kube)?
        .items
        .into_iter()
        .filter(is_relayed)
        .collect();
    jobs.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    Ok(jobs)
}

/// The Job `name` in `namespace`; an error saying so if jobrelay does not
/// relay it.
pub async fn relayed_one(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Job> {
    let api: Api<Job> = Api::namespaced(client.clone(), namespace);
    let job = api.get(name).await.map_err(from_kube)?;
    if !is_relayed(&job) {
        let managed_by = crate::view::job::managed_by(&job).unwrap_or("<none>");
        anyhow::bail!(
            "job {namespace}/{name} is not relayed by jobrelay: its spec.managedBy is {managed_by}, not {}",
            jobrelay_proto::wire::MANAGED_BY
        );
    }
    Ok(job)
}
