//! `jobset.x-k8s.io/v1alpha2` JobSet, as both sides of jobrelay read and
//! write it: the fields jobrelay acts on are typed, every other field is
//! kept as the API server gave it, so a mirror carries the whole spec and
//! the agent reports the whole status.

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Label (and annotation) the JobSet controller puts on every child Job and
/// Pod of a JobSet: the JobSet's UID.
pub const JOBSET_UID_LABEL: &str = "jobset.sigs.k8s.io/jobset-uid";

/// A JobSet: a group of replicated Jobs run as one. It is written with its
/// `apiVersion` and `kind`, as the API server needs them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct JobSet {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<JobSetSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<JobSetStatus>,
}

/// What jobrelay reads of a JobSet's spec; the rest rides along.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSetSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicated_jobs: Vec<ReplicatedJob>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Every other field (network, success and failure policies, …).
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// One replicated Job of a JobSet: a Job template run `replicas` times.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplicatedJob {
    pub name: String,
    #[serde(default)]
    pub template: JobTemplateSpec,
    /// Every other field (replicas, groupName, dependsOn, …).
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// What jobrelay reads of a JobSet's status; the rest rides along.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSetStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// `Completed` or `Failed` once the JobSet finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal_state: Option<String>,
    /// Every other field (replicatedJobsStatus, restarts, …).
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl Serialize for JobSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use k8s_openapi::Resource as _;
        #[derive(Serialize)]
        struct Typed<'a> {
            #[serde(rename = "apiVersion")]
            api_version: &'static str,
            kind: &'static str,
            metadata: &'a ObjectMeta,
            #[serde(skip_serializing_if = "Option::is_none")]
            spec: &'a Option<JobSetSpec>,
            #[serde(skip_serializing_if = "Option::is_none")]
            status: &'a Option<JobSetStatus>,
        }
        Typed {
            api_version: JobSet::API_VERSION,
            kind: JobSet::KIND,
            metadata: &self.metadata,
            spec: &self.spec,
            status: &self.status,
        }
        .serialize(serializer)
    }
}

impl JobSet {
    /// Whether the condition `type_` is `True`.
    pub fn condition(&self, type_: &str) -> bool {
        self.status
            .iter()
            .flat_map(|s| &s.conditions)
            .any(|c| c.type_ == type_ && c.status == "True")
    }

    /// `Completed` or `Failed`: the JobSet controller acts on it no more.
    pub fn is_finished(&self) -> bool {
        self.condition("Completed") || self.condition("Failed")
    }

    /// `spec.suspend`.
    pub fn suspended(&self) -> bool {
        self.spec.as_ref().and_then(|s| s.suspend) == Some(true)
    }
}

/// Whether the cluster `client` talks to serves JobSets (their CRD is
/// installed): a discovery read, which every authenticated client may make.
pub async fn served(client: &kube::Client) -> Result<bool, kube::Error> {
    use k8s_openapi::Resource as _;
    match client.list_api_group_resources(JobSet::API_VERSION).await {
        Ok(list) => Ok(list
            .resources
            .iter()
            .any(|r| r.name == JobSet::URL_PATH_SEGMENT)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

impl k8s_openapi::Resource for JobSet {
    const API_VERSION: &'static str = "jobset.x-k8s.io/v1alpha2";
    const GROUP: &'static str = "jobset.x-k8s.io";
    const KIND: &'static str = "JobSet";
    const VERSION: &'static str = "v1alpha2";
    const URL_PATH_SEGMENT: &'static str = "jobsets";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for JobSet {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Value {
        serde_json::json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {
                "managedBy": "jobrelay.dev/manager",
                "suspend": false,
                "failurePolicy": {"maxRestarts": 2},
                "replicatedJobs": [
                    {"name": "leader", "replicas": 1, "template": {"spec": {"template": {"spec": {
                        "restartPolicy": "Never", "containers": [{"name": "c", "image": "t:1"}]}}}}},
                    {"name": "workers", "replicas": 3, "dependsOn": [{"name": "leader", "status": "Ready"}],
                     "template": {"spec": {"parallelism": 2, "template": {"spec": {
                        "restartPolicy": "Never", "containers": [{"name": "c", "image": "t:1"}]}}}}},
                ],
            },
            "status": {
                "restarts": 1,
                "terminalState": "Completed",
                "conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                    "message": "jobset completed successfully", "lastTransitionTime": "2026-11-27T10:00:00Z"}],
                "replicatedJobsStatus": [{"name": "leader", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}],
            },
        })
    }

    #[test]
    fn every_field_survives_a_read_and_a_write() {
        let jobset: JobSet = serde_json::from_value(example()).unwrap();
        let written = serde_json::to_value(&jobset).unwrap();
        assert_eq!(written, example(), "apiVersion and kind included");
        let spec = jobset.spec.as_ref().unwrap();
        assert_eq!(spec.replicated_jobs.len(), 2);
        assert_eq!(spec.replicated_jobs[1].rest["replicas"], 3);
        assert_eq!(
            spec.replicated_jobs[1]
                .template
                .spec
                .as_ref()
                .unwrap()
                .parallelism,
            Some(2)
        );
    }

    #[test]
    fn finished_is_a_true_completed_or_failed_condition() {
        let mut jobset: JobSet = serde_json::from_value(example()).unwrap();
        assert!(jobset.is_finished());
        jobset.status.as_mut().unwrap().conditions[0].type_ = "Failed".into();
        assert!(jobset.is_finished());
        jobset.status.as_mut().unwrap().conditions[0].status = "False".into();
        assert!(!jobset.is_finished());
        jobset.status.as_mut().unwrap().conditions[0].type_ = "Suspended".into();
        jobset.status.as_mut().unwrap().conditions[0].status = "True".into();
        assert!(!jobset.is_finished());
        assert!(!jobset.suspended(), "the condition is not the spec");
    }
}
