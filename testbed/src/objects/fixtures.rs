//! Jobs for tests, with the Pod annotations the kwok stages read
//! (`tests/controlplane/kwok-stages.yaml`, documented in `tests/README.md`).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements};
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
    cpu: Option<String>,
    node_selector: BTreeMap<String, String>,
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
            cpu: None,
            node_selector: BTreeMap::new(),
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

    /// Each Pod requests this much CPU (what Kueue's quota counts).
    pub fn cpu(mut self, quantity: &str) -> Self {
        self.cpu = Some(quantity.into());
        self
    }

    /// Each Pod may run only on nodes with this label.
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.node_selector.insert(key.into(), value.into());
        self
    }

    pub fn suspended(mut self) -> Self {
        self.suspend = true;
        self
    }

    pub fn build(self) -> Job {
        let mut pod = pod_spec();
        if let Some(cpu) = &self.cpu {
            pod.containers[0].resources = Some(ResourceRequirements {
                requests: Some(BTreeMap::from([("cpu".to_string(), Quantity(cpu.clone()))])),
                ..Default::default()
            });
        }
        if !self.node_selector.is_empty() {
            pod.node_selector = Some(self.node_selector.clone());
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
