//! What of the manager's Kueue scheduling reaches a mirror. On the manager a
//! ResourceFlavor is quota; on a worker the worker's own scheduler places
//! the Pods. So by default the mirror's pod template carries none of the
//! node labels and tolerations the Job's flavors added (those recorded on
//! the Job when it was placed, see [`scheduling::recorded`]), whether they
//! came from Kueue's admission or not; a user's own stay. Opted in
//! (`--kueue-flavors-on-mirrors`, for fleets whose flavors name worker node
//! pools) the suspended mirror gets them before admission and nothing is
//! taken out. Either way Topology Aware Scheduling's gate never reaches a
//! worker: only Kueue on the manager lifts it, so Pods there would wait for
//! ever.

use jobrelay_proto::wire::TOPOLOGY_SCHEDULING_GATE;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PodSpec;

use super::scheduling::{self, Constraints, Scheduling};

/// Where the assigned flavors' node labels and tolerations go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Flavors {
    /// Quota on the manager only: left out of mirrors (as MultiKueue does).
    #[default]
    Quota,
    /// Also scheduling on the worker: on the mirror, suspended or not.
    OnMirrors,
}

impl Flavors {
    pub fn on_mirrors(on: bool) -> Flavors {
        match on {
            true => Flavors::OnMirrors,
            false => Flavors::Quota,
        }
    }
}

/// Fits `mirror`, built from `manager_job`, for its worker. `reserved`: the
/// constraints of a reservation the Job is waiting on before admission
/// (added only when opted in). A Job has one pod set: whatever Kueue named
/// it, its constraints are all there are.
pub fn for_worker(
    mirror: &mut Job,
    manager_job: &Job,
    flavors: Flavors,
    reserved: Option<&Scheduling>,
) {
    let recorded = scheduling::recorded(manager_job).whole();
    let reserved = reserved.map(Scheduling::whole);
    if let Some(pod) = mirror.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        fit(pod, flavors, reserved.as_ref(), &recorded);
    }
}

/// [`for_worker`] over the pod templates of a mirror of any kind, each
/// with the name of its pod set (a JobSet's: its replicated Jobs, by name),
/// the flavors recorded on `manager_object`: each template gets, or loses,
/// its own pod set's.
pub fn for_worker_pods<'a, K: kube::Resource>(
    pods: impl IntoIterator<Item = (&'a str, &'a mut PodSpec)>,
    manager_object: &K,
    flavors: Flavors,
    reserved: Option<&Scheduling>,
) {
    let recorded = scheduling::recorded(manager_object);
    for (pod_set, pod) in pods {
        let reserved = reserved.map(|r| r.of(pod_set));
        fit(pod, flavors, reserved.as_ref(), &recorded.of(pod_set));
    }
}

/// One pod template, given `reserved` (opted in) or stripped of
/// `recorded`, and freed of the topology gate.
fn fit(
    pod: &mut PodSpec,
    flavors: Flavors,
    reserved: Option<&Constraints>,
    recorded: &Constraints,
) {
    match (flavors, reserved) {
        (Flavors::OnMirrors, Some(reserved)) => scheduling::apply_to(pod, reserved),
        (Flavors::OnMirrors, None) => {}
        (Flavors::Quota, _) => strip(pod, recorded),
    }
    lift_gate(pod);
}

/// Takes out of the pod template exactly what `flavors` added: a node
/// selector entry of the same key and value, an equal toleration.
fn strip(pod: &mut PodSpec, flavors: &Constraints) {
    if let Some(selector) = pod.node_selector.as_mut() {
        selector.retain(|key, value| flavors.node_selector.get(key) != Some(value));
        if selector.is_empty() {
            pod.node_selector = None;
        }
    }
    if let Some(tolerations) = pod.tolerations.as_mut() {
        tolerations.retain(|t| !flavors.tolerations.contains(t));
        if tolerations.is_empty() {
            pod.tolerations = None;
        }
    }
}

/// Removes Kueue's topology scheduling gate; other gates stay.
fn lift_gate(pod: &mut PodSpec) {
    if let Some(gates) = pod.scheduling_gates.as_mut() {
        gates.retain(|g| g.name != TOPOLOGY_SCHEDULING_GATE);
        if gates.is_empty() {
            pod.scheduling_gates = None;
        }
    }
}

#[cfg(test)]
#[path = "mirror_scheduling_tests.rs"]
mod tests;
