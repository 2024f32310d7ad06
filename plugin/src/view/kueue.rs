//! A relayed Job's Kueue Workload, when the manager cluster runs Kueue:
//! found by its owner reference to the Job, read as plain JSON so either
//! version the API server serves (`v1beta1`, `v1beta2`) reads the same.

use std::collections::BTreeSet;

use jobrelay_proto::wire::MANAGED_BY;
use serde::Serialize;
use serde_json::Value;

/// Where the Workload stands in Kueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum WorkloadState {
    /// Queued: no quota reserved.
    Pending,
    /// Quota reserved; its admission checks (jobrelay's among them) decide.
    QuotaReserved,
    Admitted,
    /// Being evicted (preempted, `waitForPodsReady`, deactivated…).
    Evicted,
    /// `spec.active: false`: taken out of its queue.
    Inactive,
    Finished,
}

/// One admission check's state on the Workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    pub name: String,
    /// As Kueue wrote it: `Pending`, `Ready`, `Retry`, `Rejected`.
    pub state: String,
    pub message: Option<String>,
    /// The check is one jobrelay answers (its AdmissionCheck's
    /// `controllerName` is jobrelay's); `None` when the AdmissionChecks
    /// could not be read.
    pub jobrelay: Option<bool>,
}

/// A Job's Workload, as the KUEUE column and `describe` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KueueView {
    pub workload: String,
    pub state: WorkloadState,
    /// The reason of the condition that set the state, if any.
    pub reason: Option<String>,
    pub message: Option<String>,
    pub queue: Option<String>,
    pub cluster_queue: Option<String>,
    pub checks: Vec<Check>,
}

impl KueueView {
    /// `QuotaReserved (jobrelay: Pending)`: the state, and jobrelay's
    /// checks — every check when which are jobrelay's is not known.
    pub fn cell(&self) -> String {
        let checks: Vec<String> = self
            .checks
            .iter()
            .filter(|c| c.jobrelay != Some(false))
            .map(|c| format!("{}: {}", c.name, c.state))
            .collect();
        match checks.is_empty() {
            true => format!("{:?}", self.state),
            false => format!("{:?} ({})", self.state, checks.join(", ")),
        }
    }
}

/// What was read of Kueue on the manager cluster: the Workloads, and the
/// names of jobrelay's AdmissionChecks when they could be read. Empty
/// without Kueue.
#[derive(Debug, Clone, Default)]
pub struct Workloads {
    pub workloads: Vec<Value>,
    pub ours: Option<BTreeSet<String>>,
}

impl Workloads {
    /// The Workload of the Job with `job_uid`, if it has one.
    pub fn of(&self, job_uid: &str) -> Option<KueueView> {
        workload_of(job_uid, &self.workloads).map(|w| view(w, self.ours.as_ref()))
    }
}

/// The names of the AdmissionChecks jobrelay answers, among `checks`
/// (AdmissionCheck objects).
pub fn jobrelay_checks(checks: &[Value]) -> BTreeSet<String> {
    checks
        .iter()
        .filter(|c| c["spec"]["controllerName"] == MANAGED_BY)
        .filter_map(|c| c["metadata"]["name"].as_str())
        .map(String::from)
        .collect()
}

/// The Workload among `workloads` that the Job with `job_uid` owns.
pub fn workload_of<'a>(job_uid: &str, workloads: &'a [Value]) -> Option<&'a Value> {
    workloads.iter().find(|w| {
        w["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|o| o["uid"] == job_uid && o["kind"] == "Job")
    })
}

/// The Workload as the plugin shows it; `ours` names jobrelay's checks,
/// when they could be read.
pub fn view(workload: &Value, ours: Option<&BTreeSet<String>>) -> KueueView {
    let text = |v: &Value| v.as_str().map(String::from);
    let conditions = workload["status"]["conditions"].as_array();
    let holds = |type_: &str| {
        conditions
            .into_iter()
            .flatten()
            .find(|c| c["type"] == type_ && c["status"] == "True")
    };
    let inactive = workload["spec"]["active"] == false;
    let (state, condition) = [
        ("Finished", WorkloadState::Finished),
        ("Evicted", WorkloadState::Evicted),
        ("Admitted", WorkloadState::Admitted),
        ("QuotaReserved", WorkloadState::QuotaReserved),
    ]
    .into_iter()
    .find_map(|(type_, state)| holds(type_).map(|c| (state, Some(c))))
    .unwrap_or(match inactive {
        true => (WorkloadState::Inactive, None),
        false => (WorkloadState::Pending, holds("QuotaReserved")),
    });
    let pending_reason = conditions
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "QuotaReserved" && c["status"] == "False");
    let condition = condition.or(match state {
        WorkloadState::Pending => pending_reason,
        _ => None,
    });
    let checks = workload["status"]["admissionChecks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let name = text(&c["name"]).unwrap_or_default();
            Check {
                jobrelay: ours.map(|ours| ours.contains(&name)),
                name,
                state: text(&c["state"]).unwrap_or_default(),
                message: text(&c["message"]).filter(|m| !m.is_empty()),
            }
        })
        .collect();
    KueueView {
        workload: text(&workload["metadata"]["name"]).unwrap_or_default(),
        state,
        reason: condition.and_then(|c| text(&c["reason"])),
        message: condition
            .and_then(|c| text(&c["message"]))
            .filter(|m| !m.is_empty()),
        queue: text(&workload["spec"]["queueName"]),
        cluster_queue: text(&workload["status"]["admission"]["clusterQueue"]),
        checks,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A Workload owned by Job `uid-<job>` with these conditions (type,
    /// status) and jobrelay's check in `check_state`.
    pub(crate) fn workload(job: &str, conditions: &[(&str, &str)], check_state: &str) -> Value {
        let conditions: Vec<Value> = conditions
            .iter()
            .map(|(type_, status)| json!({"type": type_, "status": status, "reason": format!("{type_}Reason"), "message": ""}))
            .collect();
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {
                "name": format!("job-{job}-1a2b3"),
                "namespace": "ml",
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": format!("uid-{job}"), "controller": true}],
            },
            "spec": {"queueName": "team-a"},
            "status": {
                "conditions": conditions,
                "admission": {"clusterQueue": "fleet"},
                "admissionChecks": [
                    {"name": "jobrelay", "state": check_state, "message": "placed on worker-1"},
                    {"name": "provisioning", "state": "Ready"},
                ],
            },
        })
    }

    #[test]
    fn the_state_follows_kueues_conditions() {
        let cases: [(&[(&str, &str)], WorkloadState); 6] = [
            (&[], WorkloadState::Pending),
            (&[("QuotaReserved", "False")], WorkloadState::Pending),
            (&[("QuotaReserved", "True")], WorkloadState::QuotaReserved),
            (
                &[("QuotaReserved", "True"), ("Admitted", "True")],
                WorkloadState::Admitted,
            ),
            (
                &[
                    ("QuotaReserved", "True"),
                    ("Admitted", "True"),
                    ("Evicted", "True"),
                ],
                WorkloadState::Evicted,
            ),
            (
                &[("Admitted", "False"), ("Finished", "True")],
                WorkloadState::Finished,
            ),
        ];
        for (conditions, state) in cases {
            let shown = view(&workload("train", conditions, "Pending"), None);
            assert_eq!(shown.state, state, "{conditions:?}");
        }
        let mut inactive = workload("train", &[], "Pending");
        inactive["spec"]["active"] = json!(false);
        assert_eq!(view(&inactive, None).state, WorkloadState::Inactive);
    }

    #[test]
    fn the_cell_shows_jobrelays_check_or_every_check_when_unknown() {
        let reserved = workload("train", &[("QuotaReserved", "True")], "Pending");
        let ours = jobrelay_checks(&[
            json!({"metadata": {"name": "jobrelay"}, "spec": {"controllerName": MANAGED_BY}}),
            json!({"metadata": {"name": "provisioning"}, "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}}),
        ]);
        assert_eq!(ours, BTreeSet::from(["jobrelay".to_string()]));
        let shown = view(&reserved, Some(&ours));
        assert_eq!(shown.cell(), "QuotaReserved (jobrelay: Pending)");
        assert_eq!(
            shown.checks[0].message.as_deref(),
            Some("placed on worker-1")
        );
        assert_eq!(shown.cluster_queue.as_deref(), Some("fleet"));
        assert_eq!(shown.queue.as_deref(), Some("team-a"));
        assert_eq!(
            view(&reserved, None).cell(),
            "QuotaReserved (jobrelay: Pending, provisioning: Ready)"
        );
    }

    #[test]
    fn the_workload_is_the_one_the_job_owns() {
        let workloads = [
            workload("other", &[], "Pending"),
            workload("train", &[], "Pending"),
        ];
        let found = workload_of("uid-train", &workloads).expect("owned");
        assert_eq!(found["metadata"]["name"], "job-train-1a2b3");
        assert!(workload_of("uid-none", &workloads).is_none());
        let read = Workloads {
            workloads: workloads.to_vec(),
            ours: None,
        };
        assert_eq!(
            read.of("uid-train").map(|k| k.workload).as_deref(),
            Some("job-train-1a2b3")
        );
        assert_eq!(Workloads::default().of("uid-train"), None);
    }
}
