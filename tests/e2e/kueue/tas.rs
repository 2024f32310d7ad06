//! Topology Aware Scheduling on the manager: a Job admitted in a TAS flavor
//! gets Kueue's `kueue.x-k8s.io/topology` scheduling gate on the manager,
//! which only Kueue there would lift. Its mirror goes without the gate, so
//! the worker's own scheduler places its Pod, which runs and completes.

use jobrelay_e2e::scenario::{Scenario, WAIT};
use jobrelay_proto::wire::TOPOLOGY_SCHEDULING_GATE;
use jobrelay_testbed::kit;
use jobrelay_testbed::objects::kueue_objects::{self, condition_true};
use jobrelay_testbed::wait::{self, Seen};
use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use serde_json::json;

use super::flavors::{admitted, queue_in, resumed_mirror};
use super::{CHECK, queued_job, running_on_a_worker, setup};

/// The names of the scheduling gates of a Job's pod template.
fn gates(job: &Job) -> Vec<String> {
    job.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.scheduling_gates.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.name)
        .collect()
}

#[tokio::test]
async fn a_tas_flavors_job_is_relayed_without_the_topology_gate_and_completes() {
    let (clusters, relay) = setup().await;
    let s = Scenario::new(clusters, relay, "tas").await;
    let client = kit::client(clusters.manager()).await;
    // One topology level, the host: the manager cluster's node (kwok's,
    // labelled `type: kwok`, with room for a thousand CPUs) is its domain.
    let name = format!("tas-{}", s.ns);
    let setup = async {
        let topology = json!({
            "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
        });
        kueue_objects::apply(&client, "Topology", None, topology).await?;
        let flavor = json!({
            "metadata": {"name": name},
            "spec": {"nodeLabels": {"type": "kwok"}, "topologyName": name},
        });
        kueue_objects::apply(&client, "ResourceFlavor", None, flavor).await?;
        queue_in(&client, &s, &name, &[CHECK]).await
    };
    setup.await.unwrap_or_else(|e| panic!("{e:#}"));
    let queues = kueue_objects::api(&client, "ClusterQueue", None);
    wait::until(
        format!("TAS ClusterQueue {} active", s.ns),
        WAIT,
        || async {
            match queues.get(&s.ns).await {
                Ok(q) if condition_true(&q.data, "Active") => Seen::Ready(()),
                Ok(q) => Seen::Waiting(q.data["status"]["conditions"].to_string()),
                Err(e) => Seen::Waiting(e.to_string()),
            }
        },
    )
    .await;

    // Long enough to read the running mirror: a finished one goes at once.
    let uid = s.create(queued_job(&s, "tas").run_for("10s")).await;
    let admitted = admitted(&s, "tas").await;
    assert!(
        gates(&admitted)
            .iter()
            .any(|g| g == TOPOLOGY_SCHEDULING_GATE),
        "Kueue admitted the Job through TAS: its template has the topology gate ({:?})",
        gates(&admitted)
    );
    let worker = s.assigned_worker("tas").await;
    let mirrors: Api<Job> = s.worker_api(&worker.name).await;
    let mirror = resumed_mirror(&mirrors, "tas", &admitted).await;
    assert!(
        gates(&mirror).is_empty(),
        "the mirror has no scheduling gate: {:?}",
        gates(&mirror)
    );
    running_on_a_worker(&s, &uid, "the TAS Job's Pod").await;
    s.wait_condition("tas", "Complete").await;
    s.finish(WAIT).await;
}
