//! The deletion machine: one pure step over a mirror being deleted — what
//! the worker shows of its Job and Pods, and the clock — that says what to
//! do next. `mirrors/deletion.rs` executes it.
//!
//! The Job goes first, with Background propagation (the executor's delete),
//! so the garbage collector removes its Pods; a Pod that outlives its Job by
//! the orphan grace (left by an Orphan delete, or never cascaded) is deleted
//! by the agent itself; and only when neither the Job nor any Pod of its
//! origin UID is seen — a Terminating one counts as seen — is the mirror
//! confirmed gone with the API server and reported.

use std::time::{Duration, Instant};

/// What the machine remembers of one deletion between steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// When no Job of the origin UID was first seen.
    pub job_gone_since: Option<Instant>,
    /// When the Job was last sent a delete.
    pub last_delete: Option<Instant>,
}

/// An object of the mirror as the worker shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leftover {
    /// Has a deletionTimestamp: the API server is removing it.
    pub terminating: bool,
}

/// The next thing to do for one deletion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Delete these Jobs (indices into the Jobs seen), all or none: the
    /// first delete, or again after `resend_after` without effect.
    DeleteJobs(Vec<usize>),
    /// Delete these Pods (indices into the Pods seen): they outlived their
    /// Job by the grace.
    DeletePods(Vec<usize>),
    /// The caches show nothing left: ask the API server, then report gone.
    ConfirmGone,
    /// The garbage collector, the kubelet or the grace has to act first.
    Wait,
}

/// Decides the next thing to do; returns it with the progress to remember
/// once it is done.
pub fn step(
    progress: Progress,
    jobs: &[Leftover],
    pods: &[Leftover],
    now: Instant,
    grace: Duration,
    resend_after: Duration,
) -> (Progress, Next) {
    let mut progress = progress;
    if !jobs.is_empty() {
        progress.job_gone_since = None;
        let due: Vec<usize> = indices(jobs, |j| !j.terminating);
        let resend = progress
            .last_delete
            .is_none_or(|at| now.saturating_duration_since(at) >= resend_after);
        if due.is_empty() || !resend {
            return (progress, Next::Wait);
        }
        progress.last_delete = Some(now);
        return (progress, Next::DeleteJobs(due));
    }
    if pods.is_empty() {
        return (progress, Next::ConfirmGone);
    }
    let since = *progress.job_gone_since.get_or_insert(now);
    let outlived: Vec<usize> = indices(pods, |p| !p.terminating);
    if outlived.is_empty() || now.saturating_duration_since(since) < grace {
        return (progress, Next::Wait);
    }
    (progress, Next::DeletePods(outlived))
}

fn indices(objects: &[Leftover], keep: impl Fn(&Leftover) -> bool) -> Vec<usize> {
    objects
        .iter()
        .enumerate()
        .filter(|(_, o)| keep(o))
        .map(|(i, _)| i)
        .collect()
}

/// What a delete request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    /// This request deleted it.
    Now,
    /// Already gone, or replaced by an object of another UID (the UID
    /// precondition failed): nothing of this mirror to delete there.
    NothingThere,
    /// Refused or failed; the next step sends it again.
    Failed,
}

/// Reads the API server's answer to a delete with a UID precondition.
pub fn deleted(code: Option<u16>) -> Deleted {
    match code {
        None => Deleted::Now,
        Some(404 | 409) => Deleted::NothingThere,
        Some(_) => Deleted::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(10);
    const RESEND: Duration = Duration::from_secs(5);
    const LIVE: Leftover = Leftover { terminating: false };
    const TERMINATING: Leftover = Leftover { terminating: true };

    fn at(start: Instant, secs: u64) -> Instant {
        start + Duration::from_secs(secs)
    }

    #[test]
    fn a_live_job_is_deleted_then_left_to_the_garbage_collector() {
        let t = Instant::now();
        let (progress, next) = step(Progress::default(), &[LIVE], &[LIVE], t, GRACE, RESEND);
        assert_eq!(next, Next::DeleteJobs(vec![0]));
        assert_eq!(progress.last_delete, Some(t));
        let (_, next) = step(progress, &[TERMINATING], &[LIVE], at(t, 1), GRACE, RESEND);
        assert_eq!(next, Next::Wait, "a Terminating Job is on its way");
    }

    #[test]
    fn a_delete_without_effect_is_sent_again_only_after_the_resend_interval() {
        let t = Instant::now();
        let (progress, _) = step(Progress::default(), &[LIVE], &[], t, GRACE, RESEND);
        let (progress, next) = step(progress, &[LIVE], &[], at(t, 2), GRACE, RESEND);
        assert_eq!(next, Next::Wait);
        let (progress, next) = step(progress, &[LIVE], &[], at(t, 5), GRACE, RESEND);
        assert_eq!(next, Next::DeleteJobs(vec![0]));
        assert_eq!(progress.last_delete, Some(at(t, 5)));
    }

    #[test]
    fn pods_that_outlive_their_job_are_deleted_after_the_grace() {
        let t = Instant::now();
        let pods = [LIVE, TERMINATING, LIVE];
        let (progress, next) = step(Progress::default(), &[], &pods, t, GRACE, RESEND);
        assert_eq!(next, Next::Wait);
        assert_eq!(progress.job_gone_since, Some(t));
        let (progress, next) = step(progress, &[], &pods, at(t, 9), GRACE, RESEND);
        assert_eq!(
            next,
            Next::Wait,
            "within the grace the garbage collector may still act"
        );
        let (progress, next) = step(progress, &[], &pods, at(t, 10), GRACE, RESEND);
        assert_eq!(
            next,
            Next::DeletePods(vec![0, 2]),
            "Terminating ones are on their way"
        );
        assert_eq!(
            progress.job_gone_since,
            Some(t),
            "the grace counts from the first look"
        );
    }

    #[test]
    fn terminating_pods_still_count_as_there() {
        let t = Instant::now();
        let (progress, _) = step(Progress::default(), &[], &[TERMINATING], t, GRACE, RESEND);
        let (_, next) = step(progress, &[], &[TERMINATING], at(t, 60), GRACE, RESEND);
        assert_eq!(next, Next::Wait);
    }

    #[test]
    fn only_nothing_at_all_is_confirmed() {
        let t = Instant::now();
        let (_, next) = step(Progress::default(), &[], &[], t, GRACE, RESEND);
        assert_eq!(next, Next::ConfirmGone);
    }

    #[test]
    fn a_job_that_reappears_restarts_the_grace() {
        let t = Instant::now();
        let (progress, _) = step(Progress::default(), &[], &[LIVE], t, GRACE, RESEND);
        let (progress, next) = step(progress, &[LIVE], &[LIVE], at(t, 3), GRACE, RESEND);
        assert_eq!(next, Next::DeleteJobs(vec![0]));
        assert_eq!(progress.job_gone_since, None);
    }

    #[test]
    fn a_delete_answered_not_found_or_with_another_uid_leaves_nothing_to_do() {
        assert_eq!(deleted(None), Deleted::Now);
        assert_eq!(deleted(Some(404)), Deleted::NothingThere);
        assert_eq!(
            deleted(Some(409)),
            Deleted::NothingThere,
            "UID precondition failed"
        );
        assert_eq!(deleted(Some(500)), Deleted::Failed);
        assert_eq!(deleted(Some(403)), Deleted::Failed);
    }
}
