//! When finished and deactivated Jobs are due for cleanup: pure decisions over
//! a Job's conditions and annotations and the configured retention.

use std::time::Duration;

use jobrelay_proto::duration;
use jobrelay_proto::wire::{DEACTIVATED_ANNOTATION, REMOTE_RETENTION_ANNOTATION};
use k8s_openapi::jiff::Timestamp;

use crate::job::lifecycle::{Lifecycle, has_finalizer, lifecycle};
use crate::kinds::RelayedKind;

/// When the Job finished: the transition time of its Complete or Failed condition.
pub fn finished_at<K: RelayedKind>(job: &K) -> Option<Timestamp> {
    job.finished_at()
}

/// When jobrelay deactivated the Job, if it did.
pub fn deactivated_at<K: RelayedKind>(job: &K) -> Option<Timestamp> {
    job.meta()
        .annotations
        .as_ref()?
        .get(DEACTIVATED_ANNOTATION)?
        .parse()
        .ok()
}

/// How long the Job's mirror stays after it finished: its own annotation if
/// it has a valid one, else `default`. An invalid annotation is reported (the
/// default applies) so the user can be told on the Job.
pub fn remote_retention<K: RelayedKind>(job: &K, default: Duration) -> (Duration, Option<String>) {
    let Some(value) = job
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(REMOTE_RETENTION_ANNOTATION))
    else {
        return (default, None);
    };
    match duration::parse(value) {
        Ok(keep) => (keep, None),
        Err(e) => (
            default,
            Some(format!(
                "annotation {REMOTE_RETENTION_ANNOTATION}: {e}; using {default:?}"
            )),
        ),
    }
}

/// Whether the worker should hold a mirror of this Job now: while it is
/// active or suspended (the mirror is kept, suspended), and after it finished
/// until its remote retention ran out.
pub fn keeps_mirror<K: RelayedKind>(job: &K, now: Timestamp, default: Duration) -> bool {
    match lifecycle(job) {
        Lifecycle::Active | Lifecycle::Suspended => true,
        Lifecycle::Finished if has_finalizer(job) => {
            let (keep, _) = remote_retention(job, default);
            finished_at(job).is_some_and(|at| remaining(now, at, keep).is_some())
        }
        _ => false,
    }
}

/// Time left until `since + keep`, or `None` when that moment has passed.
pub fn remaining(now: Timestamp, since: Timestamp, keep: Duration) -> Option<Duration> {
    let elapsed = now.duration_since(since);
    let elapsed = Duration::try_from(elapsed).unwrap_or(Duration::ZERO);
    keep.checked_sub(elapsed).filter(|left| !left.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;

    fn job(annotations: serde_json::Value, conditions: serde_json::Value) -> Job {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "annotations": annotations},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn a_mirror_is_kept_while_its_job_runs_or_is_suspended_not_while_it_is_deleted() {
        let now = at("2026-11-22T10:00:00Z");
        let mut running = job(serde_json::json!({}), serde_json::json!([]));
        assert!(keeps_mirror(&running, now, Duration::ZERO));
        running.spec = Some(
            serde_json::from_value(serde_json::json!({"suspend": true, "template": {}})).unwrap(),
        );
        assert!(
            keeps_mirror(&running, now, Duration::ZERO),
            "a suspended Job keeps its (suspended) mirror"
        );
        running.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
        assert!(!keeps_mirror(&running, now, Duration::ZERO));
    }

    #[test]
    fn a_job_finished_when_its_terminal_condition_turned_true() {
        let complete = job(
            serde_json::json!({}),
            serde_json::json!([
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": "2026-11-22T10:00:00Z"},
                {"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-22T10:00:01Z"},
            ]),
        );
        assert_eq!(finished_at(&complete), Some(at("2026-11-22T10:00:01Z")));
        assert_eq!(
            finished_at(&job(serde_json::json!({}), serde_json::json!([]))),
            None
        );
    }

    #[test]
    fn the_jobs_annotation_overrides_the_default_and_a_bad_one_is_reported() {
        let default = Duration::from_secs(60);
        let none = job(serde_json::json!({}), serde_json::json!([]));
        assert_eq!(remote_retention(&none, default), (default, None));
        let longer = job(
            serde_json::json!({REMOTE_RETENTION_ANNOTATION: "2h"}),
            serde_json::json!([]),
        );
        assert_eq!(
            remote_retention(&longer, default),
            (Duration::from_secs(7200), None)
        );
        let bad = job(
            serde_json::json!({REMOTE_RETENTION_ANNOTATION: "-3m"}),
            serde_json::json!([]),
        );
        let (keep, warning) = remote_retention(&bad, default);
        assert_eq!(keep, default);
        assert!(warning.unwrap().contains("-3m"));
    }

    #[test]
    fn remaining_counts_down_to_nothing() {
        let since = at("2026-11-22T10:00:00Z");
        let keep = Duration::from_secs(600);
        assert_eq!(
            remaining(at("2026-11-22T10:04:00Z"), since, keep),
            Some(Duration::from_secs(360))
        );
        assert_eq!(remaining(at("2026-11-22T10:10:00Z"), since, keep), None);
        assert_eq!(remaining(at("2026-11-22T11:00:00Z"), since, keep), None);
        assert_eq!(remaining(since, since, Duration::ZERO), None);
    }

    #[test]
    fn a_deactivated_job_says_when() {
        let deactivated = job(
            serde_json::json!({DEACTIVATED_ANNOTATION: "2026-11-22T10:00:00Z"}),
            serde_json::json!([]),
        );
        assert_eq!(
            deactivated_at(&deactivated),
            Some(at("2026-11-22T10:00:00Z"))
        );
    }
}
