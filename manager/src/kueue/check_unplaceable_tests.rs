//! The check decision for a Job no cluster can take now: when it is sent
//! back, how soon, when it is rejected, and what each answer says.

use super::*;

#[test]
fn a_job_that_fits_on_no_cluster_is_sent_back_saying_what_is_short() {
    assert_eq!(decide(&input()), CheckStep::Reserve(AWAIT_MIRROR));
    let short = Input {
        no_room: Some("w1: room for 1 of 3 Pods; short of cpu".into()),
        ..input()
    };
    let step = decide(&short);
    assert!(
        matches!(&step, CheckStep::Retry { message, after: RETRY_AFTER }
            if message.contains("has room") && message.contains("w1: room for 1 of 3 Pods; short of cpu")),
        "{step:?}"
    );
}

#[test]
fn a_workload_no_cluster_can_take_is_told_what_rules_out_each() {
    let nowhere = Input {
        placeable: false,
        ..input()
    };
    assert!(
        matches!(decide(&nowhere), CheckStep::Retry { message, .. } if message == "no worker cluster (any WorkerCluster) is connected"),
        "{:?}",
        decide(&nowhere)
    );
    let ruled_out = Input {
        placeable: false,
        ruled_out: vec![
            ("w1".into(), RuledOut::Namespace("team-a".into())),
            ("w2".into(), RuledOut::Kind("JobSet")),
        ],
        ..input()
    };
    let step = decide(&ruled_out);
    assert!(
        matches!(&step, CheckStep::Retry { message, .. } if message.contains("(w1: its spec.namespaceSelector does not admit namespace team-a; w2: its agent does not mirror JobSet)")),
        "{step:?}"
    );
}

#[test]
fn a_job_whose_namespace_no_allowed_cluster_admits_is_rejected_saying_how_to_resume() {
    let refused = Input {
        placeable: false,
        ruled_out: vec![("w1".into(), RuledOut::Namespace("team-x".into()))],
        namespace_admitted_nowhere: Some("team-x".into()),
        ..input()
    };
    let step = decide(&refused);
    assert!(
        matches!(&step, CheckStep::Rejected(message)
            if message.contains("admits namespace team-x") && message.contains("spec.active to true")),
        "no retry can help until an administrator changes a WorkerCluster: {step:?}"
    );
    let pinned_away = Input {
        job: Some(JobSide {
            pinned: Some("w2".into()),
            pinned_connected: false,
            ..JobSide::default()
        }),
        ..refused
    };
    assert!(
        matches!(decide(&pinned_away), CheckStep::Retry { message, .. } if message.contains("pinned to cluster w2")),
        "a pin speaks first: {:?}",
        decide(&pinned_away)
    );
}

#[test]
fn a_job_avoiding_the_only_cluster_that_could_take_it_is_sent_back_saying_so() {
    let avoiding = Input {
        placeable: false,
        avoiding: Some(("w1".into(), "2026-11-27T12:10:00Z".into())),
        ..input()
    };
    assert!(
        matches!(decide(&avoiding), CheckStep::Retry { message, .. } if message.contains("avoids until 2026-11-27T12:10:00Z") && message.contains("waitForPodsReady")),
        "{:?}",
        decide(&avoiding)
    );
}

#[test]
fn a_workload_no_worker_can_take_is_retried_later_each_time_but_one_waiting_for_room_is_not() {
    let secs = Duration::from_secs;
    #[rustfmt::skip]
    let cases = [(0, secs(10)), (1, secs(20)), (2, secs(40)), (4, secs(160)), (5, secs(300)), (40, secs(300))];
    for (retries, expected) in cases {
        assert_eq!(retry_after(retries), expected, "after {retries} retries");
        let nowhere = Input {
            placeable: false,
            retries,
            ..input()
        };
        assert!(
            matches!(decide(&nowhere), CheckStep::Retry { after, .. } if after == expected),
            "after {retries} retries"
        );
        let no_room = Input {
            no_room: Some("w1: room for 0 of 1 Pods; short of cpu".into()),
            retries,
            ..input()
        };
        assert!(
            matches!(
                decide(&no_room),
                CheckStep::Retry {
                    after: RETRY_AFTER,
                    ..
                }
            ),
            "room comes back: tried again soon"
        );
    }
}

#[test]
fn retries_when_no_worker_can_take_it() {
    let i = Input {
        placeable: false,
        ..input()
    };
    assert!(matches!(
        decide(&i),
        CheckStep::Retry {
            after: RETRY_AFTER,
            ..
        }
    ));
    assert!(matches!(
        decide(&placed(true, false)),
        CheckStep::Retry { message, .. } if message.contains("w1") && message.contains("not connected")
    ));
}

#[test]
fn rejects_a_job_bound_or_pinned_outside_the_allowed_clusters() {
    let only_w2 = Allowed::Only(BTreeSet::from(["w2".to_string()]));
    let bound = Input {
        allowed: Ok(only_w2.clone()),
        ..placed(true, true)
    };
    assert!(matches!(decide(&bound), CheckStep::Rejected(m) if m.contains("bound to cluster w1")));
    let pinned = Input {
        allowed: Ok(only_w2),
        job: Some(JobSide {
            pinned: Some("w1".into()),
            ..JobSide::default()
        }),
        ..input()
    };
    assert!(
        matches!(decide(&pinned), CheckStep::Rejected(m) if m.contains("pinned to cluster w1"))
    );
}

#[test]
fn a_job_pinned_to_a_disconnected_cluster_is_sent_back_saying_so() {
    let pinned = |connected| Input {
        job: Some(JobSide {
            pinned: Some("worker-1".into()),
            pinned_connected: connected,
            ..JobSide::default()
        }),
        ..input()
    };
    assert_eq!(
        decide(&pinned(false)),
        CheckStep::Retry {
            message: "the Job is pinned to cluster worker-1 (label jobrelay.dev/cluster), which is not connected".into(),
            after: RETRY_AFTER,
        }
    );
    assert_eq!(decide(&pinned(true)), CheckStep::Reserve(AWAIT_MIRROR));
}
