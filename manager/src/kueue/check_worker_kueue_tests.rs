//! The check decision for a Job whose mirror is queued in its worker's own
//! Kueue.

use super::*;

fn queued_on_worker(admitted: bool, reserved_for: u64) -> Input {
    let mirror = match admitted {
        true => QueuedMirror::Admitted,
        false => QueuedMirror::Suspended,
    };
    in_worker_kueue(mirror, reserved_for)
}

fn in_worker_kueue(mirror: QueuedMirror, reserved_for: u64) -> Input {
    let mut i = placed(true, true);
    if let Some(job) = i.job.as_mut() {
        job.worker_kueue = Some(WorkerKueueSide {
            mirror,
            admit_within: Duration::from_secs(60),
        });
    }
    i.reserved_for = Duration::from_secs(reserved_for);
    i
}

#[test]
fn a_mirror_queued_on_its_worker_is_ready_only_once_that_kueue_admitted_it() {
    assert_eq!(
        decide(&queued_on_worker(false, 20)),
        CheckStep::Wait(Duration::from_secs(40)),
        "looked at again when the time runs out, or when the mirror changes"
    );
    assert!(
        matches!(decide(&queued_on_worker(true, 20)), CheckStep::Ready(m) if m.contains("admitted by cluster w1's Kueue"))
    );
}

#[test]
fn a_mirror_not_admitted_in_time_is_withdrawn_and_the_workload_sent_back() {
    let step = decide(&queued_on_worker(false, 60));
    assert!(
        matches!(&step, CheckStep::SendBack { message, after: RETRY_AFTER, not_admitted: true } if message.contains("admitWithin") && message.contains("w1")),
        "{step:?}"
    );
    let mut withdrawing = queued_on_worker(false, 90);
    withdrawing.job.as_mut().unwrap().withdrawing = true;
    assert_eq!(
        decide(&withdrawing),
        CheckStep::Wait(AWAIT_MIRROR),
        "readmitted before the old mirror is gone: wait for it"
    );
}

#[test]
fn an_evicted_job_queued_on_its_worker_has_its_mirror_withdrawn_once() {
    let mut evicted = queued_on_worker(true, 0);
    evicted.evicted = true;
    assert!(
        matches!(decide(&evicted), CheckStep::Withdraw { why, avoid: false } if why.contains("evicted")),
        "the worker's Kueue would run it again if it were only suspended"
    );
    let mut released = queued_on_worker(true, 0);
    released.quota_reserved = false;
    assert!(
        matches!(decide(&released), CheckStep::Withdraw { why, .. } if why.contains("no quota"))
    );
    evicted.job.as_mut().unwrap().withdrawing = true;
    assert_eq!(decide(&evicted), CheckStep::Idle);
    let mut finished = queued_on_worker(true, 0);
    finished.quota_reserved = false;
    finished.finished = true;
    assert_eq!(
        decide(&finished),
        CheckStep::Idle,
        "a finished Job's mirror goes by retention"
    );
}

#[test]
fn a_mirror_the_workers_kueue_evicts_after_the_check_is_ready_sends_the_workload_back_once() {
    let ready = |mirror| {
        let mut i = in_worker_kueue(mirror, 0);
        i.state = Some(CheckState::Ready);
        i
    };
    assert_eq!(
        decide(&ready(QueuedMirror::Admitted)),
        CheckStep::Admitted(WATCH_ADMITTED)
    );
    let evicted = ready(QueuedMirror::Suspended);
    assert!(
        matches!(decide(&evicted), CheckStep::SendBack { message, after: RETRY_AFTER, not_admitted: false }
            if message.contains("cluster w1's Kueue evicted the mirror") && message.contains("w1 tried last")),
        "{:?}",
        decide(&evicted)
    );
    let mut withdrawing = evicted;
    withdrawing.job.as_mut().unwrap().withdrawing = true;
    assert_eq!(
        decide(&withdrawing),
        CheckStep::Admitted(WATCH_ADMITTED),
        "sent back once; Kueue evicts the Workload on Retry"
    );
    assert_eq!(
        decide(&ready(QueuedMirror::NotHeld)),
        CheckStep::Admitted(WATCH_ADMITTED),
        "a mirror not reported (yet) is no eviction"
    );
}
