//! jobrelay's CRDs on the manager cluster, and every worker of a cluster set
//! registered as a WorkerCluster.

use std::time::Duration;

use jobrelay_manager::clusters::worker_cluster::{WorkerCluster, WorkerClusterSpec};
use jobrelay_manager::clusters::worker_cluster_set::WorkerClusterSet;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{CustomResourceExt, ResourceExt};

use crate::cluster::ClusterSet;
use crate::wait::{self, Seen};

/// Applies a CRD server-side and waits until it is established.
pub(crate) async fn install_crd(
    crds: &Api<CustomResourceDefinition>,
    name: &str,
    crd: &(impl serde::Serialize + std::fmt::Debug),
) -> anyhow::Result<()> {
    let apply = PatchParams::apply("jobrelay-e2e").force();
    crds.patch(name, &apply, &Patch::Apply(crd)).await?;
    wait::try_until(
        format!("CRD {name} established"),
        Duration::from_secs(30),
        || async {
            match crds.get(name).await {
                Ok(crd) => {
                    let established = crd
                        .status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True");
                    if established {
                        Seen::Ready(())
                    } else {
                        Seen::Waiting("not established yet".into())
                    }
                }
                Err(error) => Seen::Waiting(error.to_string()),
            }
        },
    )
    .await?;
    Ok(())
}

/// Installs jobrelay's CRDs (WorkerCluster, WorkerClusterSet) on the manager
/// cluster, waits until they are served, and registers every worker of the
/// set.
pub async fn register(set: &ClusterSet) -> anyhow::Result<()> {
    let client = set.manager().client().await?;
    register_on(client, set.workers().iter().map(|w| w.name.as_str())).await
}

/// Installs jobrelay's CRDs with `client` and registers `workers` there: any
/// cluster can be made a manager's.
pub async fn register_on(
    client: kube::Client,
    workers: impl IntoIterator<Item = &str>,
) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [WorkerCluster::crd(), WorkerClusterSet::crd()] {
        install_crd(&crds, &crd.name_any(), &crd).await?;
    }
    let apply = PatchParams::apply("jobrelay-e2e").force();
    let clusters: Api<WorkerCluster> = Api::all(client);
    for worker in workers {
        let registration = WorkerCluster::new(worker, WorkerClusterSpec::default());
        wait::try_until(
            format!("WorkerCluster {worker} registered"),
            Duration::from_secs(30),
            || async {
                match clusters
                    .patch(worker, &apply, &Patch::Apply(&registration))
                    .await
                {
                    Ok(_) => Seen::Ready(()),
                    Err(error) => Seen::Waiting(error.to_string()),
                }
            },
        )
        .await?;
    }
    Ok(())
}

/// Waits for an Event `reason` about WorkerCluster `cluster` (written, as
/// for any cluster-scoped object, in the `default` namespace) that was
/// recorded at `since` or later; its note.
pub async fn wait_cluster_event(
    client: kube::Client,
    cluster: &str,
    reason: &str,
    since: Timestamp,
) -> String {
    let events: Api<Event> = Api::namespaced(client, "default");
    wait::until(
        format!("a {reason} Event on WorkerCluster {cluster}"),
        crate::wait::WAIT,
        || async {
            let found = events.list(&ListParams::default()).await.map(|list| {
                list.items.into_iter().find(|e| {
                    e.reason.as_deref() == Some(reason)
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(cluster)
                        && e.event_time.as_ref().is_some_and(|t| t.0 >= since)
                })
            });
            match found {
                Ok(Some(event)) => Seen::Ready(event.note.unwrap_or_default()),
                seen => Seen::Waiting(format!("{seen:?}")),
            }
        },
    )
    .await
}
