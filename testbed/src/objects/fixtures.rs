//! Jobs for tests, with the Pod annotations the kwok stages read
//! (`tests/controlplane/kwok-stages.yaml`, documented in `tests/README.md`).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PodSpec, PodTemplateSpec, ResourceRequirements, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;

/// Pod annotation: Pending -> Running after this long (Go duration).
pub const START_AFTER: &str = "test.jobrelay.dev/start-after";
/// Pod annotation: Running -> finished after this long (Go duration).
pub const RUN_FOR: &str = "test.jobrelay.dev/run-for";
/// Pod annotation: `Failed` makes the Pod fail; anything else succeeds.
pub const OUTCOME: &str = "test.jobrelay.dev/outcome";
/// Pod annotation: how long a deleted Pod stays Terminating (Go duration).
pub const TERMINATE_AFTER: &str = "test.jobrelay.dev/terminate-after";

/// A batch/v1 Job whose Pods kwok runs as the builder says.
#[derive(Debug, Clone)]
pub struct TestJob {
    name: String,
    namespace: String,
    pod_annotations: BTreeMap<String, String>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    parallelism: i32,
    completions: i32,
    backoff_limit: i32,
    managed_by: Option<String>,
    suspend: bool,
    requests: BTreeMap<String, String>,
    node_selector: BTreeMap<String, String>,
    required_node_labels: Vec<NodeSelectorRequirement>,
    tolerations: Vec<Toleration>,
    grace_period: Option<i64>,
}

impl TestJob {
    /// A Job with one Pod that runs for a second and succeeds.
    pub fn new(namespace: &str, name: &str) -> Self {
        TestJob {
            name: name.into(),
            namespace: namespace.into(),
            pod_annotations: BTreeMap::from([(RUN_FOR.to_string(), "1s".to_string())]),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            parallelism: 1,
            completions: 1,
            backoff_limit: 0,
            managed_by: None,
            suspend: false,
            requests: BTreeMap::new(),
            node_selector: BTreeMap::new(),
            required_node_labels: Vec::new(),
            tolerations: Vec::new(),
            grace_period: None,
        }
    }

    /// Each Pod runs this long (Go duration: `500ms`, `90s`, `1h`).
    pub fn run_for(mut self, duration: &str) -> Self {
        self.pod_annotations.insert(RUN_FOR.into(), duration.into());
        self
    }

    /// Each Pod fails instead of succeeding.
    pub fn failing(mut self) -> Self {
        self.pod_annotations.insert(OUTCOME.into(), "Failed".into());
        self
    }

    /// A deleted Pod stays Terminating this long.
    pub fn terminate_after(mut self, duration: &str) -> Self {
        self.pod_annotations
            .insert(TERMINATE_AFTER.into(), duration.into());
        self
    }

    pub fn parallelism(mut self, parallelism: i32, completions: i32) -> Self {
        self.parallelism = parallelism;
        self.completions = completions;
        self
    }

    pub fn backoff_limit(mut self, limit: i32) -> Self {
        self.backoff_limit = limit;
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// An annotation on the Job itself (not its Pods).
    pub fn annotate(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }

    /// Sets `spec.managedBy`, e.g. to `jobrelay.dev/manager`.
    pub fn managed_by(mut self, manager: &str) -> Self {
        self.managed_by = Some(manager.into());
        self
    }

    /// Each Pod requests this much CPU (what Kueue's quota and the
    /// scheduler count).
    pub fn cpu(self, quantity: &str) -> Self {
        self.request("cpu", quantity)
    }

    /// Each Pod requests this much memory.
    pub fn memory(self, quantity: &str) -> Self {
        self.request("memory", quantity)
    }

    /// Each Pod asks for `count` GPUs (`nvidia.com/gpu`).
    pub fn gpus(self, count: u32) -> Self {
        self.request("nvidia.com/gpu", &count.to_string())
    }

    /// Each Pod requests `quantity` of `resource`. An extended resource
    /// (anything but cpu, memory and ephemeral-storage) is set as its limit
    /// too, which the API server requires of resources it cannot overcommit.
    pub fn request(mut self, resource: &str, quantity: &str) -> Self {
        self.requests.insert(resource.into(), quantity.into());
        self
    }

    /// Each Pod may run only on nodes with this label.
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.node_selector.insert(key.into(), value.into());
        self
    }

    /// Each Pod may run only on nodes whose label `key` has one of
    /// `values` (required node affinity; several calls must all hold).
    pub fn require_node_label_in(mut self, key: &str, values: &[&str]) -> Self {
        self.required_node_labels.push(NodeSelectorRequirement {
            key: key.into(),
            operator: "In".into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        });
        self
    }

    /// Each Pod tolerates the taint `key=value:effect`.
    pub fn tolerate(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.tolerations.push(Toleration {
            key: Some(key.into()),
            operator: Some("Equal".into()),
            value: Some(value.into()),
            effect: Some(effect.into()),
            toleration_seconds: None,
        });
        self
    }

    /// Each Pod's `terminationGracePeriodSeconds` (the default 30).
    pub fn grace_period(mut self, seconds: i64) -> Self {
        self.grace_period = Some(seconds);
        self
    }

    pub fn suspended(mut self) -> Self {
        self.suspend = true;
        self
    }

    pub fn build(self) -> Job {
        let mut pod = pod_spec();
        if !self.requests.is_empty() {
            pod.containers[0].resources = Some(resources(&self.requests));
        }
        if !self.node_selector.is_empty() {
            pod.node_selector = Some(self.node_selector.clone());
        }
        if let Some(seconds) = self.grace_period {
            pod.termination_grace_period_seconds = Some(seconds);
        }
        if !self.required_node_labels.is_empty() {
            pod.affinity = Some(required_node_affinity(self.required_node_labels));
        }
        if !self.tolerations.is_empty() {
            pod.tolerations = Some(self.tolerations);
        }
        Job {
            metadata: ObjectMeta {
                name: Some(self.name),
                namespace: Some(self.namespace),
                labels: (!self.labels.is_empty()).then_some(self.labels),
                annotations: (!self.annotations.is_empty()).then_some(self.annotations),
                ..Default::default()
            },
            spec: Some(JobSpec {
                parallelism: Some(self.parallelism),
                completions: Some(self.completions),
                backoff_limit: Some(self.backoff_limit),
                managed_by: self.managed_by,
                suspend: Some(self.suspend),
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        annotations: Some(self.pod_annotations),
                        ..Default::default()
                    }),
                    spec: Some(pod),
                },
                ..Default::default()
            }),
            status: None,
        }
    }
}

/// Requests as given; extended resources also as limits.
fn resources(requests: &BTreeMap<String, String>) -> ResourceRequirements {
    let quantities = |extended_only: bool| -> BTreeMap<String, Quantity> {
        requests
            .iter()
            .filter(|(resource, _)| {
                !extended_only
                    || !["cpu", "memory", "ephemeral-storage"].contains(&resource.as_str())
            })
            .map(|(resource, quantity)| (resource.clone(), Quantity(quantity.clone())))
            .collect()
    };
    let limits = quantities(true);
    ResourceRequirements {
        requests: Some(quantities(false)),
        limits: (!limits.is_empty()).then_some(limits),
        ..Default::default()
    }
}

fn required_node_affinity(requirements: Vec<NodeSelectorRequirement>) -> Affinity {
    Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(requirements),
                    match_fields: None,
                }],
            }),
            preferred_during_scheduling_ignored_during_execution: None,
        }),
        ..Default::default()
    }
}

/// The spec of every test Pod: one container of a workload image kwok never
/// pulls, never restarted.
pub fn pod_spec() -> PodSpec {
    PodSpec {
        restart_policy: Some("Never".into()),
        termination_grace_period_seconds: Some(30),
        containers: vec![Container {
            name: "work".into(),
            image: Some("registry.example/jobrelay/test-workload:1".into()),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The status patch of a Job that succeeded: started at `started`, finished
/// at `finished`, as the API server accepts it for a Job of another manager.
pub fn succeeded_status(
    started: k8s_openapi::jiff::Timestamp,
    finished: k8s_openapi::jiff::Timestamp,
) -> serde_json::Value {
    let condition = |type_: &str| {
        serde_json::json!({"type": type_, "status": "True", "lastTransitionTime": finished.to_string(),
            "reason": "CompletionsReached", "message": "Reached expected number of succeeded pods"})
    };
    serde_json::json!({"status": {
        "startTime": started.to_string(), "completionTime": finished.to_string(), "succeeded": 1,
        "conditions": [condition("SuccessCriteriaMet"), condition("Complete")],
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_builders_shape_the_pod() {
        let job = TestJob::new("ns", "fit")
            .cpu("3")
            .memory("1Gi")
            .gpus(2)
            .tolerate("nvidia.com/gpu", "present", "NoSchedule")
            .require_node_label_in("test.jobrelay.dev/pool", &["large", "gpu"])
            .build();
        let pod = job.spec.expect("spec").template.spec.expect("pod spec");
        let resources = pod.containers[0].resources.clone().expect("resources");
        let requests = resources.requests.expect("requests");
        assert_eq!(requests.len(), 3);
        assert_eq!(requests["cpu"], Quantity("3".into()));
        let limits = resources.limits.expect("a limit for the extended resource");
        assert_eq!(
            limits.keys().collect::<Vec<_>>(),
            ["nvidia.com/gpu"],
            "only extended resources are limited"
        );
        let tolerations = pod.tolerations.expect("tolerations");
        assert_eq!(tolerations[0].key.as_deref(), Some("nvidia.com/gpu"));
        let terms = pod
            .affinity
            .and_then(|a| a.node_affinity)
            .and_then(|n| n.required_during_scheduling_ignored_during_execution)
            .expect("required node affinity")
            .node_selector_terms;
        let requirement = &terms[0].match_expressions.as_ref().expect("expressions")[0];
        assert_eq!(requirement.operator, "In");
        assert_eq!(
            requirement.values.as_deref(),
            Some(&["large".to_string(), "gpu".to_string()][..])
        );
    }

    #[test]
    fn a_plain_job_asks_for_nothing() {
        let pod = TestJob::new("ns", "plain")
            .build()
            .spec
            .expect("spec")
            .template
            .spec
            .expect("pod spec");
        assert!(pod.containers[0].resources.is_none());
        assert!(pod.affinity.is_none() && pod.tolerations.is_none());
    }
}
