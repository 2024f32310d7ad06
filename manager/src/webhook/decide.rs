//! Whether a Job being created gets jobrelay's `spec.managedBy`: yes when
//! the LocalQueue its queue label names stands for a ClusterQueue that lists
//! an AdmissionCheck jobrelay answers, so a user sets only the queue label.
//! A Job that already says who manages it is left as it is, whoever that is.

use serde_json::json;

use crate::kueue::CONTROLLER_NAME;

/// What the webhook reads of a Job being created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreatedJob<'a> {
    pub namespace: &'a str,
    /// Its `kueue.x-k8s.io/queue-name` label.
    pub queue_name: Option<&'a str>,
    /// Its `spec.managedBy`.
    pub managed_by: Option<&'a str>,
}

/// What the caches say about Kueue's queues and checks.
pub trait Queues {
    /// The ClusterQueue of LocalQueue `name` in `namespace`, if it exists.
    fn cluster_queue_of(&self, namespace: &str, name: &str) -> Option<String>;
    /// The AdmissionChecks ClusterQueue `name` lists, if it exists.
    fn checks_of(&self, cluster_queue: &str) -> Option<Vec<String>>;
    /// The `controllerName` of AdmissionCheck `name`, if it exists.
    fn controller_of(&self, check: &str) -> Option<String>;
}

/// Why a Job is left as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leave {
    /// No queue label: Kueue does not queue it.
    NoQueueLabel,
    /// `spec.managedBy` is set already (to jobrelay's or another's).
    ManagedByAlready(String),
    LocalQueueNotFound {
        local_queue: String,
    },
    ClusterQueueNotFound {
        cluster_queue: String,
    },
    /// The ClusterQueue lists no AdmissionCheck of jobrelay's.
    NoJobrelayCheck {
        cluster_queue: String,
    },
}

/// The answer for a Job being created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Defaulting {
    Leave(Leave),
    /// Set `spec.managedBy: jobrelay.dev/manager`; the ClusterQueue and the
    /// check that call for it.
    SetManagedBy {
        cluster_queue: String,
        check: String,
    },
}

/// Decides whether `job` gets jobrelay's `spec.managedBy`.
pub fn decide(job: &CreatedJob<'_>, queues: &impl Queues) -> Defaulting {
    use Defaulting::Leave as L;
    if let Some(managed_by) = job.managed_by {
        return L(Leave::ManagedByAlready(managed_by.to_string()));
    }
    let Some(local_queue) = job.queue_name.filter(|q| !q.is_empty()) else {
        return L(Leave::NoQueueLabel);
    };
    let Some(cluster_queue) = queues.cluster_queue_of(job.namespace, local_queue) else {
        let local_queue = local_queue.to_string();
        return L(Leave::LocalQueueNotFound { local_queue });
    };
    let Some(checks) = queues.checks_of(&cluster_queue) else {
        return L(Leave::ClusterQueueNotFound { cluster_queue });
    };
    let ours = checks
        .into_iter()
        .find(|check| queues.controller_of(check).as_deref() == Some(CONTROLLER_NAME));
    match ours {
        Some(check) => Defaulting::SetManagedBy {
            cluster_queue,
            check,
        },
        None => L(Leave::NoJobrelayCheck { cluster_queue }),
    }
}

impl Defaulting {
    /// The JSON patch that carries the answer out; `None` to leave the Job.
    pub fn patch(&self) -> Option<json_patch::Patch> {
        match self {
            Defaulting::Leave(_) => None,
            Defaulting::SetManagedBy { .. } => serde_json::from_value(json!([
                {"op": "add", "path": "/spec/managedBy", "value": CONTROLLER_NAME}
            ]))
            .ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// LocalQueues by (namespace, name), ClusterQueues' checks, checks'
    /// controllers.
    #[derive(Default)]
    struct Cached {
        local: BTreeMap<(&'static str, &'static str), &'static str>,
        cluster: BTreeMap<&'static str, Vec<&'static str>>,
        checks: BTreeMap<&'static str, &'static str>,
    }

    impl Queues for Cached {
        fn cluster_queue_of(&self, namespace: &str, name: &str) -> Option<String> {
            let found = self
                .local
                .iter()
                .find(|((n, q), _)| *n == namespace && *q == name);
            found.map(|(_, cq)| cq.to_string())
        }
        fn checks_of(&self, cluster_queue: &str) -> Option<Vec<String>> {
            let checks = self.cluster.get(cluster_queue)?;
            Some(checks.iter().map(|c| c.to_string()).collect())
        }
        fn controller_of(&self, check: &str) -> Option<String> {
            self.checks.get(check).map(|c| c.to_string())
        }
    }

    /// team-a/queue → ClusterQueue team-a listing a MultiKueue check, then
    /// jobrelay's.
    fn cached() -> Cached {
        Cached {
            local: [
                (("team-a", "queue"), "team-a"),
                (("team-a", "other"), "plain"),
            ]
            .into(),
            cluster: [
                ("team-a", vec!["multi", "jobrelay"]),
                ("plain", vec!["multi"]),
            ]
            .into(),
            checks: [
                ("multi", "kueue.x-k8s.io/multikueue"),
                ("jobrelay", CONTROLLER_NAME),
            ]
            .into(),
        }
    }

    fn job(queue_name: Option<&'static str>) -> CreatedJob<'static> {
        CreatedJob {
            namespace: "team-a",
            queue_name,
            managed_by: None,
        }
    }

    #[test]
    fn a_job_in_a_queue_with_jobrelays_check_gets_jobrelays_managed_by() {
        let answer = decide(&job(Some("queue")), &cached());
        assert_eq!(
            answer,
            Defaulting::SetManagedBy {
                cluster_queue: "team-a".into(),
                check: "jobrelay".into()
            }
        );
        let patch = serde_json::to_value(answer.patch()).expect("serializes");
        assert_eq!(
            patch,
            json!([{"op": "add", "path": "/spec/managedBy", "value": "jobrelay.dev/manager"}])
        );
    }

    #[test]
    fn a_job_without_a_queue_label_is_left_alone() {
        let answer = decide(&job(None), &cached());
        assert_eq!(answer, Defaulting::Leave(Leave::NoQueueLabel));
        assert_eq!(answer.patch(), None);
        assert_eq!(
            decide(&job(Some("")), &cached()),
            Defaulting::Leave(Leave::NoQueueLabel)
        );
    }

    #[test]
    fn a_job_that_names_its_manager_keeps_it_whoever_it_is() {
        for managed_by in ["kueue.x-k8s.io/multikueue", CONTROLLER_NAME] {
            let job = CreatedJob {
                managed_by: Some(managed_by),
                ..job(Some("queue"))
            };
            assert_eq!(
                decide(&job, &cached()),
                Defaulting::Leave(Leave::ManagedByAlready(managed_by.into()))
            );
        }
    }

    #[test]
    fn a_local_queue_not_in_the_cache_leaves_the_job() {
        let elsewhere = CreatedJob {
            namespace: "team-b",
            ..job(Some("queue"))
        };
        assert_eq!(
            decide(&elsewhere, &cached()),
            Defaulting::Leave(Leave::LocalQueueNotFound {
                local_queue: "queue".into()
            })
        );
    }

    #[test]
    fn a_cluster_queue_not_in_the_cache_leaves_the_job() {
        let mut cached = cached();
        cached.cluster.remove("team-a");
        assert_eq!(
            decide(&job(Some("queue")), &cached),
            Defaulting::Leave(Leave::ClusterQueueNotFound {
                cluster_queue: "team-a".into()
            })
        );
    }

    #[test]
    fn a_cluster_queue_without_jobrelays_check_leaves_the_job() {
        assert_eq!(
            decide(&job(Some("other")), &cached()),
            Defaulting::Leave(Leave::NoJobrelayCheck {
                cluster_queue: "plain".into()
            })
        );
        // A listed check that does not exist is no check of jobrelay's.
        let mut missing = cached();
        missing.checks.remove("jobrelay");
        assert_eq!(
            decide(&job(Some("queue")), &missing),
            Defaulting::Leave(Leave::NoJobrelayCheck {
                cluster_queue: "team-a".into()
            })
        );
    }
}
