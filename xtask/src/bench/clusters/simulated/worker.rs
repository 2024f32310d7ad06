//! What a simulated worker answers, as plain data: the status a real
//! worker's Job reports while it runs and once it completed, how long its
//! run lasts (the Pod annotation the test clusters' fake nodes read), and
//! how long its cleanup takes, drawn from a measured distribution.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use jobrelay_testbed::objects::fixtures::RUN_FOR;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// A running Job's status, as the Job controller writes it once its one
/// Pod runs.
pub fn running(started: Timestamp) -> JobStatus {
    JobStatus {
        active: Some(1),
        ready: Some(1),
        terminating: Some(0),
        start_time: Some(Time(started)),
        uncounted_terminated_pods: Some(UncountedTerminatedPods::default()),
        ..Default::default()
    }
}

/// A completed Job's status: its one Pod succeeded, the success criteria
/// met, then Complete, as the Job controller writes them.
pub fn complete(started: Timestamp, finished: Timestamp) -> JobStatus {
    let condition = |type_: &str| JobCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some("CompletionsReached".into()),
        message: Some("Reached expected number of succeeded pods".into()),
        last_probe_time: Some(Time(finished)),
        last_transition_time: Some(Time(finished)),
    };
    JobStatus {
        active: Some(0),
        ready: Some(0),
        terminating: Some(0),
        succeeded: Some(1),
        start_time: Some(Time(started)),
        completion_time: Some(Time(finished)),
        conditions: Some(vec![condition("SuccessCriteriaMet"), condition("Complete")]),
        uncounted_terminated_pods: Some(UncountedTerminatedPods::default()),
        ..Default::default()
    }
}

/// How long the mirror's Pod runs: its `run-for` annotation; `None` when it
/// has none or it cannot be read (the Job then runs until deleted).
pub fn run_for(mirror: &Job) -> Option<Duration> {
    let template = mirror.spec.as_ref()?.template.metadata.as_ref()?;
    let text = template.annotations.as_ref()?.get(RUN_FOR)?;
    jobrelay_proto::duration::parse(text).ok()
}

/// Cleanup times measured on a real worker (a Background delete until Job
/// and Pod are gone), drawn from by each simulated delete.
#[derive(Debug, Clone)]
pub struct CleanupDelays(Vec<Duration>);

impl CleanupDelays {
    /// From measured latencies; none measured draws no delay.
    pub fn measured(mut samples: Vec<Duration>) -> CleanupDelays {
        samples.sort();
        CleanupDelays(samples)
    }

    /// The delay for the mirror of `origin_uid`: one of the samples, picked
    /// by a hash of the UID, so a run is repeatable and the draws follow the
    /// measured distribution.
    pub fn draw(&self, origin_uid: &str) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        let mut hasher = DefaultHasher::new();
        origin_uid.hash(&mut hasher);
        self.0[(hasher.finish() % self.0.len() as u64) as usize]
    }

    /// The median sample (zero when none).
    pub fn median(&self) -> Duration {
        self.0.get(self.0.len() / 2).copied().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jobrelay_testbed::objects::fixtures::TestJob;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn a_running_job_has_one_active_pod_and_no_condition() {
        let status = running(at(0));
        assert_eq!(status.active, Some(1));
        assert_eq!(status.conditions, None);
        assert_eq!(status.completion_time, None);
    }

    #[test]
    fn a_complete_job_meets_its_criteria_before_it_completes() {
        let status = complete(at(0), at(5));
        let types: Vec<_> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, ["SuccessCriteriaMet", "Complete"]);
        assert_eq!(status.succeeded, Some(1));
        assert_eq!(status.completion_time, Some(Time(at(5))));
    }

    #[test]
    fn the_run_time_is_the_pods_annotation() {
        let job = TestJob::new("ns", "a").run_for("90s").build();
        assert_eq!(run_for(&job), Some(Duration::from_secs(90)));
        let mut unreadable = job.clone();
        let template = unreadable.spec.as_mut().unwrap();
        let annotations = template.template.metadata.as_mut().unwrap();
        annotations.annotations.as_mut().unwrap().clear();
        assert_eq!(run_for(&unreadable), None);
    }

    #[test]
    fn a_draw_is_one_of_the_samples_and_the_same_for_the_same_uid() {
        let samples: Vec<Duration> = (1..=10).map(Duration::from_millis).collect();
        let delays = CleanupDelays::measured(samples.clone());
        let first = delays.draw("uid-1");
        assert!(samples.contains(&first));
        assert_eq!(delays.draw("uid-1"), first);
        let drawn: std::collections::HashSet<_> =
            (0..200).map(|i| delays.draw(&format!("uid-{i}"))).collect();
        assert!(drawn.len() > 5, "draws spread over the samples: {drawn:?}");
        assert_eq!(delays.median(), Duration::from_millis(6));
    }

    #[test]
    fn no_samples_draw_no_delay() {
        assert_eq!(CleanupDelays::measured(vec![]).draw("u"), Duration::ZERO);
    }
}
