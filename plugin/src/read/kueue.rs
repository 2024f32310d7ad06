//! Kueue on the manager cluster, if it is installed: its Workloads and
//! which AdmissionChecks are jobrelay's, in whichever version of
//! `kueue.x-k8s.io` the API server prefers. Without Kueue, or without the
//! right to read it, the KUEUE column shows `-` and the rest still works.

use std::collections::BTreeSet;

use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::{self, ApiResource};
use serde_json::Value;

use crate::view::kueue::{Workloads, jobrelay_checks};

const GROUP: &str = "kueue.x-k8s.io";

/// Kueue's Workloads in `namespace` (`None`: every namespace) and the
/// names of jobrelay's AdmissionChecks; empty without Kueue. What cannot
/// be read is said on stderr, not fatal.
pub async fn workloads(client: &kube::Client, namespace: Option<&str>) -> Workloads {
    let group = match discovery::group(client, GROUP).await {
        Ok(group) => group,
        Err(kube::Error::Discovery(_)) => return Workloads::default(),
        Err(error) => {
            warn(&format!(
                "cannot tell whether Kueue is installed: {}",
                crate::errors::from_kube(error)
            ));
            return Workloads::default();
        }
    };
    let Some((workload, _)) = group.recommended_kind("Workload") else {
        return Workloads::default();
    };
    let api: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &workload),
        None => Api::all_with(client.clone(), &workload),
    };
    let workloads = match list(&api).await {
        Ok(workloads) => workloads,
        Err(error) => {
            warn(&format!("cannot read Kueue's Workloads: {error}"));
            return Workloads::default();
        }
    };
    let ours = match group.recommended_kind("AdmissionCheck") {
        Some((checks, _)) => ours(client, &checks).await,
        None => None,
    };
    Workloads { workloads, ours }
}

/// The names of jobrelay's AdmissionChecks; `None` when they cannot be
/// read (then every check on a Workload is shown).
async fn ours(client: &kube::Client, checks: &ApiResource) -> Option<BTreeSet<String>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), checks);
    list(&api).await.ok().map(|checks| jobrelay_checks(&checks))
}

async fn list(api: &Api<DynamicObject>) -> anyhow::Result<Vec<Value>> {
    let objects = api
        .list(&ListParams::default())
        .await
        .map_err(crate::errors::from_kube)?;
    objects
        .items
        .into_iter()
        .map(|object| serde_json::to_value(object).map_err(anyhow::Error::from))
        .collect()
}

fn warn(text: &str) {
    eprintln!("warning: {text}; the KUEUE column shows -");
}
