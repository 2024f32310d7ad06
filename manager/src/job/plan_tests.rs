//! What follows the fleet's answers — applies, deletions, losses,
//! withdrawals — plan by plan.

use super::*;
use crate::job::withdrawal::Withdrawal;
use crate::mirror::rejection;
use jobrelay_proto::v1::RejectReason;
use jobrelay_proto::wire::{LAST_LOST_MIRROR_ANNOTATION, MIRRORS_LOST_ANNOTATION};
use serde_json::json;

use crate::job::life::tests::*;
use crate::job::life::*;

fn event<S>(plan: &Plan<S>) -> Option<(Reason, &str)> {
    plan.effects.iter().find_map(|e| match e {
        Effect::Event(reason, note) => Some((*reason, note.as_str())),
        _ => None,
    })
}

#[test]
fn a_sent_mirror_is_recorded_with_its_attempt() {
    let first = after_apply(&with(&[placed(true)]), "w1", 3, Apply::Sent, false, now());
    assert_eq!(
        event(&first),
        Some((Reason::Dispatched, "sent to cluster w1 (revision 3)"))
    );
    assert_eq!(first.then, Some(RESYNC));
    let again = with(&[
        placed(true),
        json!({"metadata": {"annotations": {MIRRORS_LOST_ANNOTATION: "1"}}}),
    ]);
    let plan = after_apply(&again, "w1", 3, Apply::Sent, false, now());
    assert_eq!(
        event(&plan).unwrap().1,
        "sent to cluster w1 (revision 3), attempt 2"
    );
}

#[test]
fn a_permanent_refusal_fails_the_job_remote_rejected() {
    let plan = after_apply(
        &with(&[placed(true)]),
        "w1",
        1,
        Apply::Rejected(rejection(RejectReason::Conflict)),
        false,
        now(),
    );
    let [Effect::WriteStatus(status)] = plan.effects.as_slice() else {
        panic!("{plan:?}");
    };
    let status = &serde_json::to_value(status).unwrap();
    let failed = &status["conditions"][1];
    assert_eq!(
        (failed["type"].as_str(), failed["reason"].as_str()),
        (Some("Failed"), Some("RemoteRejected"))
    );
    assert_eq!(
        failed["message"],
        "cluster w1 refused the Job (REJECT_REASON_CONFLICT): no"
    );
    assert_eq!(plan.then, None);
}

#[test]
fn a_refusal_that_can_clear_is_shown_while_it_lasts_and_cleared_once_held() {
    let held = with(&[placed(true)]);
    let waiting = Apply::Waiting(rejection(RejectReason::QuotaExceeded));
    let plan = after_apply(&held, "w1", 1, waiting.clone(), false, now());
    let text = "cluster w1 refused the Job (REJECT_REASON_QUOTA_EXCEEDED): no".to_string();
    assert_eq!(
        plan.effects,
        [Effect::Annotate(
            DISPATCH_WAITING_ANNOTATION,
            Some(text.clone())
        )]
    );
    assert_eq!(plan.then, Some(AWAIT_AGENT));
    let shown = with(&[
        placed(true),
        json!({"metadata": {"annotations": {DISPATCH_WAITING_ANNOTATION: text}}}),
    ]);
    assert!(
        after_apply(&shown, "w1", 1, waiting, false, now())
            .effects
            .is_empty(),
        "written once"
    );
    let cleared = after_apply(&shown, "w1", 1, Apply::InPlace, true, now());
    assert_eq!(
        cleared.effects,
        [Effect::Annotate(DISPATCH_WAITING_ANNOTATION, None)]
    );
    assert!(
        after_apply(&held, "w1", 1, Apply::InPlace, true, now())
            .effects
            .is_empty()
    );
}

#[test]
fn an_apply_that_must_wait_looks_again_later() {
    let held = with(&[placed(true)]);
    assert_eq!(
        after_apply(&held, "w1", 1, Apply::AwaitingGone, false, now()).then,
        Some(AWAIT_AGENT)
    );
    assert_eq!(
        after_apply(&held, "w1", 1, Apply::Disconnected, false, now()).then,
        Some(AWAIT_CLUSTER)
    );
}

#[test]
fn a_confirmed_deletion_releases_the_job() {
    let plan = after_cleanup::<()>("w1", Cleanup::Gone { pods_deleted: 2 }, false);
    assert_eq!(
        &plan.effects[..2],
        [Effect::RemoveFinalizer, Effect::Forget]
    );
    assert_eq!(event(&plan).unwrap().0, Reason::RemotePodsGone);
    assert!(
        event(&plan)
            .unwrap()
            .1
            .contains("2 Pods deleted by the agent")
    );
}

#[test]
fn a_lost_cluster_releases_a_deleted_job_without_confirmation() {
    let plan = after_cleanup::<()>("w1", Cleanup::Disconnected, true);
    assert_eq!(event(&plan).unwrap().0, Reason::ClusterLost);
    assert!(plan.effects.contains(&Effect::RemoveFinalizer));
    let merely_away = after_cleanup::<()>("w1", Cleanup::Disconnected, false);
    assert_eq!(merely_away.then, Some(AWAIT_CLUSTER));
}

#[test]
fn the_first_delete_is_told_and_then_the_agent_is_awaited() {
    let first = after_cleanup::<()>("w1", Cleanup::Started { first: true }, false);
    assert_eq!(event(&first).unwrap().0, Reason::RemoteCleanupStarted);
    for outcome in [Cleanup::Started { first: false }, Cleanup::Waiting] {
        let plan = after_cleanup::<()>("w1", outcome, false);
        assert!(plan.effects.is_empty());
        assert_eq!(plan.then, Some(AWAIT_AGENT));
    }
}

#[test]
fn a_loss_is_counted_shown_with_nothing_running_and_run_again() {
    let running = with(&[
        placed(true),
        json!({"status": {"active": 1, "ready": 1, "startTime": NOW}}),
    ]);
    let lost = lost(false).state.unshown_loss().cloned().unwrap();
    let plan = show_loss(&running, "w1", &lost, 3, now());
    assert_eq!(
        plan.effects[0],
        Effect::CountLoss {
            lost: 1,
            mirror_uid: "m1".into()
        }
    );
    let Effect::WriteStatus(status) = &plan.effects[1] else {
        panic!("{plan:?}")
    };
    let status = &serde_json::to_value(status).unwrap();
    assert_eq!(
        (status["active"].as_i64(), status["ready"].as_i64()),
        (Some(0), Some(0))
    );
    let (reason, note) = event(&plan).unwrap();
    assert_eq!(reason, Reason::RemoteJobLost);
    assert!(
        note.contains("cluster w1 was lost: gone") && note.contains("attempt 2 of 3"),
        "{note}"
    );
    assert_eq!(plan.effects.last(), Some(&Effect::LossShown));
}

#[test]
fn the_loss_that_reaches_the_limit_fails_the_job_remote_job_lost() {
    let twice = json!({"metadata": {"annotations": {MIRRORS_LOST_ANNOTATION: "2", LAST_LOST_MIRROR_ANNOTATION: "m0"}}});
    let job = with(&[
        placed(true),
        twice,
        json!({"status": {"active": 1, "startTime": NOW}}),
    ]);
    let plan = show_loss(
        &job,
        "w1",
        &lost(false).state.unshown_loss().cloned().unwrap(),
        3,
        now(),
    );
    let Effect::WriteStatus(status) = &plan.effects[1] else {
        panic!("{plan:?}")
    };
    let status = &serde_json::to_value(status).unwrap();
    assert_eq!(status["conditions"][1]["reason"], "RemoteJobLost");
    assert!(event(&plan).unwrap().1.contains("3 lost of 3 allowed"));
}

#[test]
fn a_loss_already_shown_or_of_a_job_no_longer_running_is_not_counted() {
    let shown = json!({"metadata": {"annotations": {MIRRORS_LOST_ANNOTATION: "1", LAST_LOST_MIRROR_ANNOTATION: "m1"}}});
    let plan = show_loss(
        &with(&[placed(true), shown]),
        "w1",
        &lost(false).state.unshown_loss().cloned().unwrap(),
        3,
        now(),
    );
    assert_eq!(plan.effects, [Effect::LossShown]);
    let done = with(&[placed(true), finished(NOW)]);
    let plan = show_loss(
        &done,
        "w1",
        &lost(false).state.unshown_loss().cloned().unwrap(),
        3,
        now(),
    );
    assert_eq!(plan.effects, [Effect::LossShown]);
}

#[test]
fn a_suspended_job_whose_mirror_kueue_asks_to_withdraw_has_it_withdrawn() {
    let suspended = json!({"spec": {"suspend": true}});
    let placed_job = with(&[suspended.clone(), placed(true)]);
    assert_eq!(
        next_step(&placed_job, None, KueueAsks::Withdraw, &config(), now()),
        Step::Withdraw {
            cluster: "w1".into(),
            why: None,
        }
    );
    assert_eq!(
        next_step(
            &with(&[placed(true)]),
            None,
            KueueAsks::Withdraw,
            &config(),
            now()
        ),
        Step::Apply {
            cluster: "w1".into()
        },
        "a Job not yet suspended keeps running until Kueue suspends it"
    );
    assert_eq!(
        next_step(
            &with(&[suspended]),
            None,
            KueueAsks::Withdraw,
            &config(),
            now()
        ),
        Step::AwaitChange,
        "nothing placed, nothing to withdraw"
    );
}

fn withdrawal(why: &str, not_admitted: bool, avoid_for: Option<Duration>) -> Withdrawal {
    Withdrawal {
        why: why.into(),
        not_admitted,
        avoid_for,
        ..Withdrawal::default()
    }
}

#[test]
fn a_withdrawal_unplaces_the_job_only_once_the_mirror_and_its_pods_are_gone() {
    let running = with(&[
        placed(true),
        json!({"status": {"active": 2, "succeeded": 1}}),
    ]);
    let evicted = withdrawal("evicted", false, None);
    let started = after_withdrawal(
        &running,
        "w1",
        Cleanup::Started { first: true },
        false,
        &evicted,
        now(),
    );
    assert_eq!(started.then, Some(AWAIT_AGENT));
    assert!(
        matches!(&started.effects[..], [Effect::Event(Reason::MirrorWithdrawalStarted, note)] if note.contains("evicted") && note.contains("w1"))
    );
    for waiting in [Cleanup::Waiting, Cleanup::Started { first: false }] {
        assert!(
            after_withdrawal(&running, "w1", waiting, false, &evicted, now())
                .effects
                .is_empty()
        );
    }
    let away = after_withdrawal(
        &running,
        "w1",
        Cleanup::Disconnected,
        false,
        &evicted,
        now(),
    );
    assert_eq!((away.effects.len(), away.then), (0, Some(AWAIT_CLUSTER)));

    let late = withdrawal("late", true, None);
    let gone = after_withdrawal(
        &running,
        "w1",
        Cleanup::Gone { pods_deleted: 0 },
        false,
        &late,
        now(),
    );
    let Effect::WriteStatus(status) = &gone.effects[0] else {
        panic!("{gone:?}");
    };
    let status = &serde_json::to_value(status).unwrap();
    assert_eq!(
        status["active"], 0,
        "nothing runs: Kueue may release the quota"
    );
    assert_eq!(status["succeeded"], 1, "what ran stays counted");
    assert_eq!(
        gone.effects[1],
        Effect::Unplace {
            from: "w1".into(),
            not_admitted: true,
            avoid_until: None,
        }
    );
    assert_eq!(gone.effects[2], Effect::Forget);
    let lost_cluster =
        after_withdrawal(&running, "w1", Cleanup::Disconnected, true, &evicted, now());
    assert_eq!(
        lost_cluster.effects[1],
        Effect::Unplace {
            from: "w1".into(),
            not_admitted: false,
            avoid_until: None,
        },
        "a Lost cluster's agent sweeps the mirror when it returns"
    );
    assert!(
        matches!(&lost_cluster.effects[3], Effect::Event(Reason::MirrorWithdrawn, note) if note.contains("Lost") && note.contains("when it returns")),
        "{lost_cluster:?}"
    );
}

#[test]
fn a_job_whose_pods_did_not_get_ready_avoids_the_cluster_for_the_time_set() {
    let running = with(&[placed(true)]);
    let ten_minutes = Duration::from_secs(600);
    let pods_not_ready = withdrawal("PodsReadyTimeout", false, Some(ten_minutes));
    let gone = Cleanup::Gone { pods_deleted: 1 };
    let plan = after_withdrawal(&running, "w1", gone.clone(), false, &pods_not_ready, now());
    let until = now().checked_add(ten_minutes).expect("a moment");
    assert_eq!(
        plan.effects[1],
        Effect::Unplace {
            from: "w1".into(),
            not_admitted: false,
            avoid_until: Some(until),
        }
    );
    assert!(
        matches!(&plan.effects[3], Effect::Event(_, note) if note.contains(&format!("avoiding cluster w1 until {until}"))),
        "{plan:?}"
    );
    let off = withdrawal("PodsReadyTimeout", false, Some(Duration::ZERO));
    let plan = after_withdrawal(&running, "w1", gone, false, &off, now());
    assert!(
        matches!(
            &plan.effects[1],
            Effect::Unplace {
                avoid_until: None,
                ..
            }
        ),
        "zero: only tried last"
    );
}
