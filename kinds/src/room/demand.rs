//! What a relayed object's Pods ask of a cluster: groups of alike Pods that
//! run at once, each with its requests and where it may go.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, NodeSelector, PodSpec, ResourceRequirements, Toleration,
};

use super::quantity::{Round, amount};
use super::{PODS, Resources};
use crate::jobset::JobSet;

/// Alike Pods that run at once, and where they may go.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodGroup {
    /// How many run at once.
    pub pods: i64,
    /// What one of them requests, `pods: 1` included.
    pub each: Resources,
    pub node_selector: BTreeMap<String, String>,
    /// The required node affinity, if any.
    pub affinity: Option<NodeSelector>,
    pub tolerations: Vec<Toleration>,
}

impl PodGroup {
    /// `pods` Pods of `spec`.
    pub fn of(spec: &PodSpec, pods: i64) -> PodGroup {
        PodGroup {
            pods,
            each: requests(spec),
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            affinity: spec
                .affinity
                .as_ref()
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .clone()
                }),
            tolerations: spec.tolerations.clone().unwrap_or_default(),
        }
    }

    /// All it asks for: `pods` × `each`.
    pub fn total(&self) -> Resources {
        let mut total = Resources::default();
        total.add(&self.each, self.pods);
        total
    }
}

/// All that `groups` ask for together.
pub fn total_of(groups: &[PodGroup]) -> Resources {
    let mut total = Resources::default();
    for group in groups {
        total.add(&group.total(), 1);
    }
    total
}

/// The Pods of a Job that run at once: `parallelism` (1 if unset), no more
/// than `completions`.
pub fn of_job(job: &Job) -> Vec<PodGroup> {
    job.spec.as_ref().map(job_group).into_iter().collect()
}

/// The Pods of a JobSet: each replicated Job's, `replicas` times.
pub fn of_jobset(jobset: &JobSet) -> Vec<PodGroup> {
    let Some(spec) = jobset.spec.as_ref() else {
        return Vec::new();
    };
    spec.replicated_jobs
        .iter()
        .filter_map(|replicated| {
            let replicas = replicated
                .rest
                .get("replicas")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(1);
            let mut group = job_group(replicated.template.spec.as_ref()?);
            group.pods = group.pods.saturating_mul(replicas);
            Some(group)
        })
        .collect()
}

fn job_group(spec: &JobSpec) -> PodGroup {
    let parallelism = i64::from(spec.parallelism.unwrap_or(1));
    let pods = spec
        .completions
        .map_or(parallelism, |c| parallelism.min(i64::from(c)));
    let pod = spec.template.spec.clone().unwrap_or_default();
    PodGroup::of(&pod, pods.max(0))
}

/// What one Pod of `spec` requests, as the scheduler counts it: its
/// containers and sidecars together, or its largest init container (with
/// the sidecars started before it) if that is more, plus the Pod's
/// overhead and one `pods`. A container that sets limits but no requests
/// requests its limits. An amount that cannot be read counts as none; the
/// API server refuses such Pods anyway.
pub fn requests(spec: &PodSpec) -> Resources {
    let mut running = Resources::default();
    for container in &spec.containers {
        running.add(&container_requests(container), 1);
    }
    let mut sidecars = Resources::default();
    let mut init = Resources::default();
    for container in spec.init_containers.iter().flatten() {
        let asked = container_requests(container);
        if container.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&asked, 1);
        } else {
            let mut with_sidecars = sidecars.clone();
            with_sidecars.add(&asked, 1);
            init.max_with(&with_sidecars);
        }
    }
    running.add(&sidecars, 1);
    running.max_with(&init);
    for (resource, quantity) in spec.overhead.iter().flatten() {
        let overhead = amount(resource, quantity, Round::Up).unwrap_or(0);
        running.add(&Resources::from([(resource.as_str(), overhead)]), 1);
    }
    running.0.insert(PODS.to_string(), 1);
    running
}

fn container_requests(container: &Container) -> Resources {
    let Some(ResourceRequirements {
        requests, limits, ..
    }) = container.resources.as_ref()
    else {
        return Resources::default();
    };
    let mut asked: BTreeMap<String, i64> = BTreeMap::new();
    for (resource, quantity) in limits.iter().flatten().chain(requests.iter().flatten()) {
        // Requests come second, so they win over limits.
        asked.insert(
            resource.clone(),
            amount(resource, quantity, Round::Up).unwrap_or(0),
        );
    }
    Resources(asked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> PodSpec {
        serde_json::from_value(json).expect("a PodSpec")
    }

    #[test]
    fn containers_add_up_and_limits_stand_in_for_missing_requests() {
        let spec = pod(serde_json::json!({"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"},
                                        "requests": {"cpu": "250m"}}},
            {"name": "c"},
        ]}));
        assert_eq!(
            requests(&spec),
            Resources::from([
                ("cpu", 750),
                ("memory", 1 << 30),
                ("nvidia.com/gpu", 1),
                ("pods", 1)
            ])
        );
    }

    #[test]
    fn the_largest_init_container_counts_if_it_is_more_and_sidecars_always_do() {
        let spec = pod(serde_json::json!({
            "initContainers": [
                {"name": "sidecar", "restartPolicy": "Always",
                 "resources": {"requests": {"cpu": "100m"}}},
                {"name": "big-init", "resources": {"requests": {"cpu": "3"}}},
            ],
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
            "overhead": {"cpu": "50m"},
        }));
        // init: 3 + sidecar 0.1 = 3.1 > running 1 + 0.1; then the overhead.
        assert_eq!(requests(&spec).get("cpu"), 3150);
    }

    #[test]
    fn a_job_runs_parallelism_pods_at_once_but_no_more_than_completions() {
        let job = |parallelism: Option<i32>, completions: Option<i32>| -> Job {
            serde_json::from_value(serde_json::json!({
                "spec": {"parallelism": parallelism, "completions": completions,
                         "template": {"spec": {
                             "containers": [{"name": "c"}],
                             "nodeSelector": {"pool": "gpu"},
                             "tolerations": [{"key": "gpu", "operator": "Exists"}],
                         }}},
            }))
            .expect("a Job")
        };
        let pods = |job: &Job| of_job(job)[0].pods;
        assert_eq!(pods(&job(None, None)), 1);
        assert_eq!(pods(&job(Some(4), None)), 4);
        assert_eq!(pods(&job(Some(4), Some(2))), 2);
        let group = &of_job(&job(Some(0), None))[0];
        assert_eq!(group.pods, 0);
        assert_eq!(group.node_selector["pool"], "gpu");
        assert_eq!(group.tolerations.len(), 1);
        assert!(of_job(&Job::default()).is_empty());
    }

    #[test]
    fn a_jobset_asks_for_each_replicated_job_replicas_times() {
        let jobset: JobSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "js"},
            "spec": {"replicatedJobs": [
                {"name": "workers", "replicas": 3, "template": {"spec": {
                    "parallelism": 2,
                    "template": {"spec": {"containers": [{"name": "c"}]}}}}},
                {"name": "driver", "template": {"spec": {
                    "template": {"spec": {"containers": [{"name": "c"}]}}}}},
            ]},
        }))
        .expect("a JobSet");
        let pods: Vec<i64> = of_jobset(&jobset).iter().map(|g| g.pods).collect();
        assert_eq!(pods, [6, 1]);
    }
}
