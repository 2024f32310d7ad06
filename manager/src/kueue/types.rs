//! The parts of Kueue's objects (`kueue.x-k8s.io/v1beta2`) jobrelay reads.
//! Only the fields used are declared, so the caches hold little; every write
//! is a server-side apply of the few fields jobrelay owns.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// API group of Kueue's objects.
pub const GROUP: &str = "kueue.x-k8s.io";
/// The version read and written.
pub const VERSION: &str = "v1beta2";

/// A Workload: Kueue's unit of admission, one per queued Job.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "Workload",
    namespaced,
    status = "WorkloadStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// `false`: deactivated (evicted, not requeued).
    #[serde(default)]
    pub active: Option<bool>,
    #[serde(default)]
    pub queue_name: Option<String>,
    /// The Job's pod template as Kueue took it at creation, before any
    /// admission: what the user's own Pods ask for.
    #[serde(default)]
    pub pod_sets: Vec<PodSet>,
}

/// A pod set, as far as jobrelay reads it: the scheduling constraints of its
/// template.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    pub name: String,
    #[serde(default)]
    pub template: PodSetTemplate,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct PodSetTemplate {
    #[serde(default)]
    pub spec: PodSetPodSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct PodSetPodSpec {
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// Set once quota is reserved: the ClusterQueue and the flavors.
    #[serde(default)]
    pub admission: Option<Admission>,
    #[serde(default)]
    pub admission_checks: Vec<AdmissionCheckState>,
}

/// A condition, as far as jobrelay reads it.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub last_transition_time: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    pub cluster_queue: String,
    #[serde(default)]
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    pub name: String,
    /// Resource name → ResourceFlavor name.
    #[serde(default)]
    pub flavors: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckState {
    pub name: String,
    /// `None`: a state this version does not know.
    #[serde(default, deserialize_with = "known_state")]
    pub state: Option<CheckState>,
    #[serde(default)]
    pub message: Option<String>,
    /// How many times Kueue saw the check go `Retry`.
    #[serde(default)]
    pub retry_count: Option<i32>,
}

/// An AdmissionCheck: a gate a ClusterQueue puts before admission, owned by
/// the controller its `controllerName` names.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "AdmissionCheck",
    status = "AdmissionCheckStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckSpec {
    pub controller_name: String,
    #[serde(default)]
    pub parameters: Option<Parameters>,
}

/// A reference to the object that configures an AdmissionCheck.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Parameters {
    pub api_group: String,
    pub kind: String,
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// A ResourceFlavor: the node labels and taints a flavor stands for.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "ResourceFlavor",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFlavorSpec {
    #[serde(default)]
    pub node_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
}

impl Workload {
    /// The condition of this type, if it is `True`.
    fn true_condition(&self, type_: &str) -> Option<&Condition> {
        self.status
            .iter()
            .flat_map(|s| &s.conditions)
            .find(|c| c.type_ == type_ && c.status == "True")
    }

    /// Whether a condition of this type is `True`.
    pub fn has(&self, type_: &str) -> bool {
        self.true_condition(type_).is_some()
    }

    /// When quota was reserved, while it is: tells one reservation from the
    /// next.
    pub fn reserved_at(&self) -> &str {
        self.true_condition("QuotaReserved")
            .and_then(|c| c.last_transition_time.as_deref())
            .unwrap_or_default()
    }

    /// The reason of a condition of this type while it is `True`.
    pub fn reason_of(&self, type_: &str) -> Option<&str> {
        self.true_condition(type_).and_then(|c| c.reason.as_deref())
    }

    /// The state of the named admission check, if the Workload lists it.
    pub fn check(&self, name: &str) -> Option<&AdmissionCheckState> {
        self.status
            .iter()
            .flat_map(|s| &s.admission_checks)
            .find(|c| c.name == name)
    }

    /// What owns the Workload: its controller owner reference, else its
    /// first one.
    pub fn owner(&self) -> Option<&OwnerReference> {
        let owners = self
            .metadata
            .owner_references
            .as_deref()
            .unwrap_or_default();
        owners
            .iter()
            .find(|o| o.controller == Some(true))
            .or_else(|| owners.first())
    }

    /// The Job that owns the Workload: (name, uid).
    pub fn owner_job(&self) -> Option<(&str, &str)> {
        self.metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.kind == "Job" && o.api_version == "batch/v1")
            .map(|o| (o.name.as_str(), o.uid.as_str()))
    }
}

/// A LocalQueue: the namespaced name a Job's `kueue.x-k8s.io/queue-name`
/// label names, standing for a ClusterQueue.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "LocalQueue",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueSpec {
    #[serde(default)]
    pub cluster_queue: String,
}

/// A ClusterQueue, as far as which AdmissionChecks it lists.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "ClusterQueue",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueSpec {
    #[serde(default)]
    pub admission_checks_strategy: Option<AdmissionChecksStrategy>,
}

/// The AdmissionChecks a ClusterQueue puts before admission (v1beta2 has no
/// other list of them).
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionChecksStrategy {
    #[serde(default)]
    pub admission_checks: Vec<AdmissionCheckStrategyRule>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckStrategyRule {
    pub name: String,
    /// The flavors the check applies to; none: every flavor.
    #[serde(default)]
    pub on_flavors: Vec<String>,
}

impl ClusterQueue {
    /// The names of the AdmissionChecks the ClusterQueue lists.
    pub fn admission_checks(&self) -> impl Iterator<Item = &str> {
        self.spec
            .admission_checks_strategy
            .iter()
            .flat_map(|s| &s.admission_checks)
            .map(|rule| rule.name.as_str())
    }

    /// Does the ClusterQueue list check `name`, and for some flavors only?
    pub fn lists(&self, name: &str) -> Option<Listed> {
        let rule = self
            .spec
            .admission_checks_strategy
            .iter()
            .flat_map(|s| &s.admission_checks)
            .find(|rule| rule.name == name)?;
        Some(match rule.on_flavors.is_empty() {
            true => Listed::OnEveryFlavor,
            false => Listed::OnSomeFlavors,
        })
    }
}

/// How a ClusterQueue lists an AdmissionCheck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    OnEveryFlavor,
    /// `onFlavors` names some.
    OnSomeFlavors,
}

/// The state of an admission check on a Workload, as Kueue spells it in
/// `status.admissionChecks[].state`.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckState {
    Pending,
    Ready,
    Retry,
    Rejected,
}

impl CheckState {
    /// The state Kueue wrote, if it is one of its four.
    pub fn parse(text: &str) -> Option<CheckState> {
        match text {
            "Pending" => Some(CheckState::Pending),
            "Ready" => Some(CheckState::Ready),
            "Retry" => Some(CheckState::Retry),
            "Rejected" => Some(CheckState::Rejected),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CheckState::Pending => "Pending",
            CheckState::Ready => "Ready",
            CheckState::Retry => "Retry",
            CheckState::Rejected => "Rejected",
        }
    }
}

/// Reads a check's state as Kueue wrote it; one this version does not know
/// is `None`, not an error, so the Workload still reads.
fn known_state<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<CheckState>, D::Error> {
    let text = Option::<String>::deserialize(deserializer)?;
    Ok(text.as_deref().and_then(CheckState::parse))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_state_reads_as_kueue_wrote_it_and_an_unknown_one_as_none() {
        let read = |state: serde_json::Value| {
            serde_json::from_value::<AdmissionCheckState>(
                serde_json::json!({"name": "jobrelay", "state": state}),
            )
            .expect("the check state reads")
            .state
        };
        assert_eq!(read("Ready".into()), Some(CheckState::Ready));
        assert_eq!(read("Retry".into()), Some(CheckState::Retry));
        assert_eq!(read("SomethingNew".into()), None);
        assert_eq!(read(serde_json::Value::Null), None);
    }
}
