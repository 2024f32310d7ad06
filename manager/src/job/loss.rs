//! What a lost mirror means for its manager Job: a pure decision over the
//! Job's lifecycle, the losses it already shows and the configured limit.
//!
//! The manager Job is the source of truth and the mirror a copy, so a mirror
//! removed behind jobrelay's back is run again as a new attempt — once what
//! is left of it is gone — until `mirrorLostLimit` losses, when the Job ends
//! `Failed` with reason `RemoteJobLost`. A Job that is no longer active (it
//! finished, is suspended or being deleted) only has the remains cleaned up.

use jobrelay_proto::wire::{LAST_LOST_MIRROR_ANNOTATION, MIRRORS_LOST_ANNOTATION};

use crate::job::lifecycle::Lifecycle;

/// The losses a manager Job shows in its annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LostSoFar {
    pub count: u32,
    /// The worker UID of the last lost mirror.
    pub last: Option<String>,
}

/// Reads the losses from the Job's annotations (an unreadable count reads as
/// none, which can only allow one more attempt).
pub fn lost_so_far<K: kube::Resource>(job: &K) -> LostSoFar {
    let annotations = job.meta().annotations.as_ref();
    let get = |key: &str| annotations.and_then(|a| a.get(key));
    LostSoFar {
        count: get(MIRRORS_LOST_ANNOTATION)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        last: get(LAST_LOST_MIRROR_ANNOTATION).cloned(),
    }
}

/// What to do about a reported loss.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LostStep {
    /// The Job shows this loss already (the report is a repeat).
    AlreadyShown,
    /// Count it; run the Job again once the remains are gone.
    RunAgain { lost: u32 },
    /// Count it; the limit is reached: the Job fails.
    Fail { lost: u32 },
    /// The Job no longer runs: clean up, count nothing, run nothing.
    CleanUpOnly,
}

/// Decides what a loss of the mirror `mirror_uid` (empty when unknown) means
/// for a Job in `lifecycle` that shows `so_far`, with `limit` losses allowed.
pub fn on_lost(lifecycle: Lifecycle, so_far: &LostSoFar, mirror_uid: &str, limit: u32) -> LostStep {
    if lifecycle != Lifecycle::Active {
        return LostStep::CleanUpOnly;
    }
    if !mirror_uid.is_empty() && so_far.last.as_deref() == Some(mirror_uid) {
        return LostStep::AlreadyShown;
    }
    let lost = so_far.count.saturating_add(1);
    if lost >= limit {
        LostStep::Fail { lost }
    } else {
        LostStep::RunAgain { lost }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::Job;

    fn shown(count: u32, last: Option<&str>) -> LostSoFar {
        LostSoFar {
            count,
            last: last.map(str::to_string),
        }
    }

    #[test]
    fn each_loss_is_counted_once_and_the_limit_fails_the_job() {
        let none = LostSoFar::default();
        assert_eq!(
            on_lost(Lifecycle::Active, &none, "m1", 3),
            LostStep::RunAgain { lost: 1 }
        );
        let one = shown(1, Some("m1"));
        assert_eq!(
            on_lost(Lifecycle::Active, &one, "m1", 3),
            LostStep::AlreadyShown
        );
        assert_eq!(
            on_lost(Lifecycle::Active, &one, "m2", 3),
            LostStep::RunAgain { lost: 2 }
        );
        assert_eq!(
            on_lost(Lifecycle::Active, &shown(2, Some("m2")), "m3", 3),
            LostStep::Fail { lost: 3 }
        );
        assert_eq!(
            on_lost(Lifecycle::Active, &none, "m1", 1),
            LostStep::Fail { lost: 1 }
        );
    }

    #[test]
    fn a_loss_of_unknown_identity_is_always_counted() {
        let one = shown(1, Some(""));
        assert_eq!(
            on_lost(Lifecycle::Active, &one, "", 3),
            LostStep::RunAgain { lost: 2 }
        );
    }

    #[test]
    fn a_job_that_no_longer_runs_is_only_cleaned_up() {
        for lifecycle in [
            Lifecycle::Finished,
            Lifecycle::Suspended,
            Lifecycle::Deleting,
        ] {
            assert_eq!(
                on_lost(lifecycle, &LostSoFar::default(), "m1", 3),
                LostStep::CleanUpOnly
            );
        }
    }

    #[test]
    fn losses_are_read_from_the_annotations() {
        let job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "annotations": {
                MIRRORS_LOST_ANNOTATION: "2", LAST_LOST_MIRROR_ANNOTATION: "m2"}}
        }))
        .unwrap();
        assert_eq!(lost_so_far(&job), shown(2, Some("m2")));
        assert_eq!(lost_so_far(&Job::default()), LostSoFar::default());
    }
}
