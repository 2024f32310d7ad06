//! The check decision, transition by transition.

use super::*;
use std::collections::BTreeSet;

#[path = "check_unplaceable_tests.rs"]
mod unplaceable;
#[path = "check_worker_kueue_tests.rs"]
mod worker_kueue;

fn input() -> Input {
    Input {
        quota_reserved: true,
        finished: false,
        evicted: false,
        evicted_for: String::new(),
        state: Some(CheckState::Pending),
        job: Some(JobSide::default()),
        allowed: Ok(Allowed::Any),
        placeable: true,
        avoiding: None,
        reserved_for: Duration::ZERO,
        not_ours: None,
        no_room: None,
        retries: 0,
        ruled_out: Vec::new(),
        namespace_admitted_nowhere: None,
    }
}

#[test]
fn an_evicted_job_has_its_mirror_withdrawn_to_be_placed_afresh() {
    let mut preempted = placed(true, true);
    preempted.evicted = true;
    preempted.evicted_for = "Preempted".into();
    assert!(
        matches!(decide(&preempted), CheckStep::Withdraw { why, avoid: false } if why.contains("Preempted") && why.contains("w1 tried last")),
        "{:?}",
        decide(&preempted)
    );
    let mut not_ready = preempted.clone();
    not_ready.evicted_for = PODS_READY_TIMEOUT.into();
    assert!(
        matches!(decide(&not_ready), CheckStep::Withdraw { avoid: true, .. }),
        "its Pods did not get ready there: avoided for a while"
    );
    let pods = "cluster w1 (1 Pending): 1 Pod wait ImagePullBackOff (container main)";
    not_ready.job.as_mut().unwrap().pods_why = Some(pods.into());
    assert!(
        matches!(decide(&not_ready), CheckStep::Withdraw { why, .. } if why.contains(&format!("(PodsReadyTimeout); its Pods on {pods}"))),
        "what its Pods waited for: {:?}",
        decide(&not_ready)
    );
    preempted.job.as_mut().unwrap().pods_why = Some(pods.into());
    assert!(
        matches!(decide(&preempted), CheckStep::Withdraw { why, .. } if !why.contains("ImagePullBackOff")),
        "preempted: the Pods are not why"
    );
    let mut unplaced = input();
    unplaced.evicted = true;
    assert_eq!(decide(&unplaced), CheckStep::Idle, "nothing to withdraw");
}

#[test]
fn an_evicted_job_whose_withdrawn_mirror_has_pods_held_says_which_while_kueue_keeps_the_quota() {
    let mut withdrawing = placed(true, true);
    withdrawing.evicted = true;
    withdrawing.evicted_for = "Preempted".into();
    withdrawing.state = Some(CheckState::Ready);
    withdrawing.job.as_mut().unwrap().withdrawing = true;
    assert_eq!(
        decide(&withdrawing),
        CheckStep::Idle,
        "no Pod held: Kueue's turn"
    );
    assert!(watches_mirror(&withdrawing, &CheckStep::Idle));
    let held = "Kueue keeps the Workload's quota until … p1 on node n1 …".to_string();
    withdrawing.job.as_mut().unwrap().pods_held = Some(held.clone());
    let said = CheckStep::Explain {
        state: CheckState::Ready,
        message: format!("Kueue evicted the Workload (Preempted); {held}"),
    };
    assert_eq!(decide(&withdrawing), said, "Ready, as Kueue left it");
    assert!(watches_mirror(&withdrawing, &said));
    let mut reset = withdrawing.clone();
    reset.state = Some(CheckState::Pending);
    assert!(
        matches!(
            decide(&reset),
            CheckStep::Explain {
                state: CheckState::Pending,
                ..
            }
        ),
        "Pending, as Kueue left it"
    );
    let mut sent_back = withdrawing.clone();
    sent_back.state = Some(CheckState::Retry);
    assert_eq!(
        decide(&sent_back),
        CheckStep::Idle,
        "Retry already says why"
    );
    let mut ended = withdrawing;
    ended.finished = true;
    assert_eq!(
        decide(&ended),
        CheckStep::Idle,
        "a finished Workload holds nothing"
    );
}

#[test]
fn only_an_admitted_or_withdrawn_workload_watches_its_mirror() {
    let waiting = input();
    assert!(!watches_mirror(&waiting, &CheckStep::Reserve(AWAIT_MIRROR)));
    assert!(!watches_mirror(&waiting, &CheckStep::Idle));
    assert!(watches_mirror(
        &waiting,
        &CheckStep::Admitted(WATCH_ADMITTED)
    ));
    let withdraw = CheckStep::Withdraw {
        why: "evicted".into(),
        avoid: false,
    };
    assert!(watches_mirror(&waiting, &withdraw));
}

#[test]
fn an_admitted_job_on_a_lost_cluster_is_sent_back_to_be_placed_elsewhere() {
    let mut admitted = placed(true, false);
    admitted.state = Some(CheckState::Ready);
    admitted.job.as_mut().unwrap().cluster_lost = true;
    assert!(
        matches!(decide(&admitted), CheckStep::Retry { message, after: RETRY_AFTER } if message.contains("cluster w1 is Lost") && message.contains("spec.lostAfter")),
        "{:?}",
        decide(&admitted)
    );
    let mut disconnected = admitted.clone();
    disconnected.job.as_mut().unwrap().cluster_lost = false;
    assert_eq!(
        decide(&disconnected),
        CheckStep::Admitted(AWAIT_LOST),
        "only disconnected: it may come back; looked at again until Lost"
    );
    let mut back = disconnected.clone();
    back.job.as_mut().unwrap().cluster_connected = true;
    assert_eq!(decide(&back), CheckStep::Admitted(WATCH_ADMITTED));
    let mut pending = admitted.clone();
    pending.state = Some(CheckState::Pending);
    assert!(
        matches!(decide(&pending), CheckStep::Retry { message, .. } if message.contains("Lost"))
    );
    let mut evicted = admitted;
    evicted.evicted = true;
    assert!(
        matches!(decide(&evicted), CheckStep::Withdraw { .. }),
        "Kueue evicted it on Retry: the mirror is given up"
    );
}

#[test]
fn a_readmitted_job_waits_for_its_withdrawal_only_while_the_cluster_is_connected() {
    let mut withdrawing = placed(true, true);
    withdrawing.job.as_mut().unwrap().withdrawing = true;
    assert_eq!(decide(&withdrawing), CheckStep::Wait(AWAIT_MIRROR));
    withdrawing.job.as_mut().unwrap().cluster_connected = false;
    assert!(
        matches!(decide(&withdrawing), CheckStep::Retry { message, .. } if message.contains("not connected")),
        "never a silent Pending"
    );
}

fn placed(held: bool, connected: bool) -> Input {
    Input {
        job: Some(JobSide {
            cluster: Some("w1".into()),
            mirror_held: held,
            cluster_connected: connected,
            ..JobSide::default()
        }),
        ..input()
    }
}

#[test]
fn nothing_to_do_without_quota_or_once_the_check_left_pending() {
    for change in [
        |i: &mut Input| i.quota_reserved = false,
        |i: &mut Input| i.finished = true,
        |i: &mut Input| i.evicted = true,
        |i: &mut Input| i.state = Some(CheckState::Ready),
        |i: &mut Input| i.state = Some(CheckState::Retry),
    ] {
        let mut i = input();
        change(&mut i);
        assert_eq!(decide(&i), CheckStep::Idle);
    }
}

#[test]
fn a_reserved_workload_is_placed_then_ready_once_its_mirror_is_held() {
    assert_eq!(decide(&input()), CheckStep::Reserve(AWAIT_MIRROR));
    assert_eq!(
        decide(&placed(false, true)),
        CheckStep::Reserve(AWAIT_MIRROR)
    );
    assert!(matches!(decide(&placed(true, true)), CheckStep::Ready(m) if m.contains("w1")));
}

#[test]
fn a_refused_mirror_keeps_the_check_pending_saying_why_then_sends_it_back() {
    let mut refused = placed(false, true);
    let side = refused.job.as_mut().expect("a Job");
    side.refused = Refused::Waiting {
        why: "cluster w1 refused the Job (REJECT_REASON_NAMESPACE_MISSING): …".into(),
        again: Duration::from_secs(90),
    };
    assert_eq!(
        decide(&refused),
        CheckStep::Pending {
            message: "cluster w1 refused the Job (REJECT_REASON_NAMESPACE_MISSING): …".into(),
            after: Duration::from_secs(90),
        },
        "never an empty Pending"
    );
    let side = refused.job.as_mut().expect("a Job");
    side.refused = Refused::TooLong("refused for 120s; cluster w1 tried last".into());
    assert_eq!(
        decide(&refused),
        CheckStep::SendBack {
            message: "refused for 120s; cluster w1 tried last".into(),
            after: RETRY_AFTER,
            not_admitted: false,
        }
    );
}

#[test]
fn a_held_mirror_waits_until_the_reservations_flavors_are_recorded_on_the_job() {
    let mut readmitted = placed(true, true);
    if let Some(job) = readmitted.job.as_mut() {
        job.flavors_to_record = true;
    }
    assert_eq!(decide(&readmitted), CheckStep::Reserve(AWAIT_MIRROR));
}

#[test]
fn waits_for_a_job_the_cache_has_not_seen() {
    let i = Input {
        job: None,
        ..input()
    };
    assert_eq!(decide(&i), CheckStep::Wait(AWAIT_MIRROR));
}

#[test]
fn invalid_parameters_send_a_reserved_workload_back_and_leave_others_alone() {
    let invalid = Input {
        allowed: Err("WorkerClusterSet gpu does not exist".into()),
        ..input()
    };
    assert!(
        matches!(decide(&invalid), CheckStep::Retry { message, .. } if message.contains("gpu"))
    );
    let unreserved = Input {
        quota_reserved: false,
        ..invalid
    };
    assert_eq!(
        decide(&unreserved),
        CheckStep::Idle,
        "written once at most, never in a loop"
    );
}

#[test]
fn a_workload_jobrelay_cannot_relay_is_rejected_once_it_holds_quota() {
    let not_ours = Input {
        not_ours: Some("Job train has no spec.managedBy".into()),
        ..input()
    };
    assert_eq!(
        decide(&not_ours),
        CheckStep::Rejected("Job train has no spec.managedBy".into())
    );
    let without_quota = Input {
        quota_reserved: false,
        ..not_ours
    };
    assert_eq!(decide(&without_quota), CheckStep::Idle);
}

#[test]
fn several_jobrelay_checks_are_pending_while_any_is() {
    use CheckState::{Pending, Ready, Rejected};
    assert_eq!(joint_state([Some(Ready), Some(Pending)]), Some(Pending));
    assert_eq!(joint_state([Some(Ready), Some(Ready)]), Some(Ready));
    assert_eq!(joint_state([Some(Rejected), Some(Ready)]), Some(Rejected));
    assert_eq!(joint_state([None, Some(Pending)]), Some(Pending));
    assert_eq!(joint_state([None, Some(Ready)]), None);
    assert_eq!(
        CheckState::parse("Retry").map(CheckState::as_str),
        Some("Retry")
    );
    assert_eq!(CheckState::parse("Unknown"), None);
}

#[test]
fn an_admitted_job_whose_pods_find_no_node_is_sent_back_saying_why() {
    let mut admitted = placed(true, true);
    admitted.state = Some(CheckState::Ready);
    assert_eq!(decide(&admitted), CheckStep::Admitted(WATCH_ADMITTED));
    let soon = Duration::from_secs(3);
    admitted.job.as_mut().expect("a Job").unschedulable = Waiting::For(soon);
    assert_eq!(
        decide(&admitted),
        CheckStep::Admitted(soon),
        "looked at again when they would have waited too long"
    );
    let why = "1 Pods found no node on cluster w1 for 130s; cluster w1 tried last";
    admitted.job.as_mut().expect("a Job").unschedulable = Waiting::TooLong(why.into());
    assert_eq!(
        decide(&admitted),
        CheckStep::Retry {
            message: why.into(),
            after: RETRY_AFTER,
        }
    );
    let mut evicted = admitted;
    evicted.evicted = true;
    assert!(
        matches!(decide(&evicted), CheckStep::Withdraw { .. }),
        "Kueue evicted it on Retry: the mirror is withdrawn"
    );
}
