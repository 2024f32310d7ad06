//! Every transition of a manager Job's life, without a cluster.

use super::*;
use jobrelay_proto::wire::{
    CLUSTER_KEY, DEACTIVATED_ANNOTATION, MANAGED_BY, REMOTE_CLEANUP_FINALIZER,
};
use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};

pub(crate) const NOW: &str = "2026-11-22T12:00:00Z";

pub(crate) fn now() -> Timestamp {
    NOW.parse().unwrap()
}

/// A relayed Job; `extra` is merged into it.
pub(crate) fn job(extra: Value) -> Job {
    let mut base = json!({
        "metadata": {"name": "train", "namespace": "ml", "uid": "u1", "annotations": {}},
        "spec": {"managedBy": MANAGED_BY, "template": {"spec": {"containers": []}}},
    });
    merge(&mut base, extra);
    serde_json::from_value(base).unwrap()
}

pub(crate) fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(base), Value::Object(extra)) => {
            for (k, v) in extra {
                merge(base.entry(k).or_insert(Value::Null), v);
            }
        }
        (base, extra) => *base = extra,
    }
}

pub(crate) fn placed(held: bool) -> Value {
    let finalizers: Vec<&str> = if held {
        vec![REMOTE_CLEANUP_FINALIZER]
    } else {
        vec![]
    };
    json!({"metadata": {"annotations": {CLUSTER_KEY: "w1"}, "finalizers": finalizers}})
}

pub(crate) fn finished(at: &str) -> Value {
    json!({"status": {"conditions": [
        {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": at},
        {"type": "Complete", "status": "True", "lastTransitionTime": at}]}})
}

pub(crate) fn deleting() -> Value {
    json!({"metadata": {"deletionTimestamp": NOW}})
}

pub(crate) fn with(parts: &[Value]) -> Job {
    let mut all = json!({});
    for part in parts {
        merge(&mut all, part.clone());
    }
    job(all)
}

pub(crate) fn config() -> Config {
    Config::default()
}

pub(crate) fn lost(accounted: bool) -> Mirror {
    let key = crate::kinds::Key::of(
        &kube::runtime::reflector::ObjectRef::<Job>::new("train").within("ml"),
    );
    Mirror {
        key,
        state: crate::mirror::State::Lost(LostMirror {
            mirror_uid: "m1".into(),
            observed: "gone".into(),
            accounted,
        }),
    }
}

pub(crate) fn cleanup(reason: DeleteReason) -> Step {
    Step::Cleanup {
        cluster: "w1".into(),
        reason,
    }
}

#[test]
fn a_job_of_another_manager_is_left_alone() {
    let foreign = job(json!({"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}));
    assert_eq!(
        next_step(&foreign, None, KueueAsks::Nothing, &config(), now()),
        Step::AwaitChange
    );
}

#[test]
fn an_active_job_is_placed_then_held_then_applied() {
    assert_eq!(
        next_step(&job(json!({})), None, KueueAsks::Nothing, &config(), now()),
        Step::Place
    );
    assert_eq!(
        next_step(
            &with(&[placed(false)]),
            None,
            KueueAsks::Nothing,
            &config(),
            now()
        ),
        Step::Hold {
            cluster: "w1".into()
        }
    );
    assert_eq!(
        next_step(
            &with(&[placed(true)]),
            None,
            KueueAsks::Nothing,
            &config(),
            now()
        ),
        Step::Apply {
            cluster: "w1".into()
        }
    );
}

#[test]
fn a_lost_mirror_is_shown_before_anything_else_and_only_once() {
    let held = with(&[placed(true)]);
    let step = next_step(
        &held,
        Some(&lost(false)),
        KueueAsks::Nothing,
        &config(),
        now(),
    );
    assert!(
        matches!(step, Step::ShowLoss { ref cluster, .. } if cluster == "w1"),
        "{step:?}"
    );
    assert_eq!(
        next_step(
            &held,
            Some(&lost(true)),
            KueueAsks::Nothing,
            &config(),
            now()
        ),
        Step::Apply {
            cluster: "w1".into()
        },
        "once shown, the fleet holds the new attempt back until the remains are gone"
    );
}

#[test]
fn a_suspended_job_keeps_its_mirror_applied_suspended() {
    let suspended = json!({"spec": {"suspend": true}});
    let unplaced = with(std::slice::from_ref(&suspended));
    assert_eq!(
        next_step(&unplaced, None, KueueAsks::Nothing, &config(), now()),
        Step::AwaitChange,
        "nothing runs, nothing to place"
    );
    assert_eq!(
        next_step(
            &with(&[suspended, placed(true)]),
            None,
            KueueAsks::Nothing,
            &config(),
            now()
        ),
        Step::Apply {
            cluster: "w1".into()
        },
        "the mirror follows: applied with suspend true"
    );
}

#[test]
fn a_suspended_job_kueue_reserved_quota_for_is_placed() {
    let suspended = with(&[json!({"spec": {"suspend": true}})]);
    assert_eq!(
        next_step(&suspended, None, KueueAsks::Place, &config(), now()),
        Step::Place
    );
}

#[test]
fn a_finished_job_keeps_its_mirror_for_the_remote_retention_unless_it_is_lost() {
    let mut config = config();
    config.retention.remote_after_finished = Duration::from_secs(600);
    let done = with(&[placed(true), finished("2026-11-22T11:55:00Z")]);
    assert_eq!(
        next_step(&done, None, KueueAsks::Nothing, &config, now()),
        Step::Requeue(Duration::from_secs(300))
    );
    assert_eq!(
        next_step(&done, Some(&lost(true)), KueueAsks::Nothing, &config, now()),
        cleanup(DeleteReason::RetentionExpired),
        "a lost mirror keeps no logs worth waiting for"
    );
    let long_done = with(&[placed(true), finished("2026-11-22T11:00:00Z")]);
    assert_eq!(
        next_step(&long_done, None, KueueAsks::Nothing, &config, now()),
        cleanup(DeleteReason::RetentionExpired)
    );
}

#[test]
fn a_released_finished_job_expires_after_the_manager_retention() {
    let mut config = config();
    config.retention.manager_after_finished = Some(Duration::from_secs(3600));
    let done = with(&[placed(false), finished("2026-11-22T11:30:00Z")]);
    let step = next_step(&done, None, KueueAsks::Nothing, &config, now());
    let Step::Expire {
        since,
        keep,
        what,
        forget,
    } = step
    else {
        panic!("{step:?}");
    };
    assert_eq!((what, forget.as_deref()), ("finished", Some("w1")));
    assert_eq!(
        expiry(since, keep, now()),
        Expiry::In(Duration::from_secs(1800))
    );
    assert_eq!(expiry(since, None, now()), Expiry::Never);
    assert_eq!(
        expiry(since, Some(Duration::from_secs(60)), now()),
        Expiry::Due
    );
}

#[test]
fn a_deactivated_job_expires_after_its_own_retention() {
    let deactivated =
        json!({"metadata": {"annotations": {DEACTIVATED_ANNOTATION: "2026-11-22T11:00:00Z"}}});
    let step = next_step(
        &with(&[deactivated]),
        None,
        KueueAsks::Nothing,
        &config(),
        now(),
    );
    assert!(
        matches!(
            step,
            Step::Expire {
                what: "deactivated",
                keep: None,
                ..
            }
        ),
        "{step:?}"
    );
}

#[test]
fn a_deleted_job_has_its_mirror_deleted_before_it_is_released() {
    assert_eq!(
        next_step(
            &with(&[placed(true), deleting()]),
            None,
            KueueAsks::Nothing,
            &config(),
            now()
        ),
        cleanup(DeleteReason::ManagerJobDeleted)
    );
    assert_eq!(
        next_step(
            &with(&[placed(false), deleting()]),
            None,
            KueueAsks::Nothing,
            &config(),
            now()
        ),
        Step::Forget {
            cluster: "w1".into()
        }
    );
    let held_nowhere = job(
        json!({"metadata": {"finalizers": [REMOTE_CLEANUP_FINALIZER], "deletionTimestamp": NOW}}),
    );
    assert_eq!(
        next_step(&held_nowhere, None, KueueAsks::Nothing, &config(), now()),
        Step::Release
    );
    assert_eq!(
        next_step(
            &with(&[deleting()]),
            None,
            KueueAsks::Nothing,
            &config(),
            now()
        ),
        Step::AwaitChange
    );
}

#[test]
fn a_running_job_on_a_lost_cluster_is_withdrawn_to_be_placed_afresh() {
    let apply = || Step::Apply {
        cluster: "w1".into(),
    };
    let withdraw = Step::Withdraw {
        cluster: "w1".into(),
        why: None,
    };
    assert_eq!(moved_when_lost(apply(), true, |c| c == "w1"), withdraw);
    let hold = Step::Hold {
        cluster: "w1".into(),
    };
    assert_eq!(moved_when_lost(hold, true, |_| true), withdraw);
}

#[test]
fn a_job_stays_where_its_cluster_is_not_lost_or_kueue_decides() {
    let apply = || Step::Apply {
        cluster: "w1".into(),
    };
    assert_eq!(moved_when_lost(apply(), true, |_| false), apply());
    assert_eq!(
        moved_when_lost(apply(), false, |_| true),
        apply(),
        "a manager-side Kueue sends it back itself"
    );
    assert_eq!(
        moved_when_lost(Step::Release, true, |_| true),
        Step::Release
    );
}
