//! The Event series and the bounded queue.

use super::*;

/// `reason` published on the Job `job` (its UID is `uid-{job}`).
fn publish(series: &mut Series, job: &str, reason: Reason, at: Timestamp) -> Write {
    series.next(&format!("uid-{job}"), job, (reason, 0), at)
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

#[test]
fn the_first_event_of_a_reason_on_a_job_is_created() {
    let mut series = Series::default();
    let Write::Create { name } = publish(&mut series, "train", Reason::Dispatched, at(0)) else {
        panic!("created");
    };
    assert!(name.starts_with("train."), "{name}");
    let other = publish(&mut series, "train", Reason::RemoteFinished, at(1));
    assert!(
        matches!(other, Write::Create { .. }),
        "another reason: {other:?}"
    );
    let elsewhere = publish(&mut series, "eval", Reason::Dispatched, at(1));
    assert!(
        matches!(elsewhere, Write::Create { .. }),
        "another Job: {elsewhere:?}"
    );
}

#[test]
fn the_same_reason_within_the_window_counts_on_the_first_event() {
    let mut series = Series::default();
    let Write::Create { name } = publish(&mut series, "train", Reason::ClusterLost, at(0)) else {
        panic!("created");
    };
    assert_eq!(
        publish(&mut series, "train", Reason::ClusterLost, at(60)),
        Write::Count {
            name: name.clone(),
            count: 2
        }
    );
    assert_eq!(
        publish(&mut series, "train", Reason::ClusterLost, at(60 + 359)),
        Write::Count { name, count: 3 },
        "the window runs from the last one"
    );
}

#[test]
fn one_reason_on_another_topic_is_a_series_of_its_own() {
    let mut series = Series::default();
    let (image, oom) = (
        topic_key("wait ImagePullBackOff"),
        topic_key("fail OOMKilled"),
    );
    assert_ne!(image, oom);
    assert_eq!(topic_key(""), 0, "no topic");
    let subject = |topic| (Reason::PodsWaiting, topic);
    let first = series.next("uid-train", "train", subject(image), at(0));
    let Write::Create { name } = first else {
        panic!("created: {first:?}");
    };
    let other = series.next("uid-train", "train", subject(oom), at(1));
    assert!(matches!(other, Write::Create { .. }), "{other:?}");
    assert_eq!(
        series.next("uid-train", "train", subject(image), at(2)),
        Write::Count { name, count: 2 },
        "the first topic's series goes on"
    );
}

#[test]
fn after_the_window_a_new_event_is_created() {
    let mut series = Series::default();
    publish(&mut series, "train", Reason::ClusterLost, at(0));
    let later = publish(&mut series, "train", Reason::ClusterLost, at(360));
    assert!(matches!(later, Write::Create { .. }), "{later:?}");
    assert_eq!(
        series.recent["uid-train"].len(),
        1,
        "in place of the old one"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn past_a_full_queue_an_event_is_dropped_and_counted_never_held() {
    // Nothing answers; the writer task cannot run before this test
    // yields, so every Event stays queued.
    let nowhere = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let events = Events::new(
        kube::Client::try_from(nowhere).unwrap(),
        "test",
        JobEvents::Steps,
    );
    for index in 0..QUEUED + 10 {
        let job = ObjectReference {
            uid: Some(format!("uid-{index}")),
            name: Some(format!("job-{index}")),
            namespace: Some("ml".into()),
            ..ObjectReference::default()
        };
        events.publish(&job, Reason::Dispatched, "placed".into());
    }
    assert_eq!(events.dropped().get(), 10);
    let series = events.series();
    assert!(
        series.recent.contains_key("uid-0")
            && !series.recent.contains_key(format!("uid-{QUEUED}").as_str()),
        "a dropped Event starts no series"
    );
}

#[test]
fn an_object_without_a_uid_starts_no_series() {
    let mut series = Series::default();
    for second in 0..2 {
        let write = series.next("", "train", (Reason::ClusterLost, 0), at(second));
        assert!(matches!(write, Write::Create { .. }), "{write:?}");
    }
    assert!(series.recent.is_empty());
}

#[test]
fn a_job_forgotten_starts_no_series() {
    let mut series = Series::default();
    publish(&mut series, "train", Reason::ClusterLost, at(0));
    publish(&mut series, "eval", Reason::ClusterLost, at(0));
    series.forget("uid-train");
    assert!(series.recent.len() == 1, "{series:?}");
    assert!(matches!(
        publish(&mut series, "train", Reason::ClusterLost, at(1)),
        Write::Create { .. }
    ));
    assert!(matches!(
        publish(&mut series, "eval", Reason::ClusterLost, at(1)),
        Write::Count { count: 2, .. }
    ));
}

#[test]
fn what_ran_out_is_forgotten_as_events_are_published() {
    let mut series = Series::default();
    for i in 0..1000 {
        publish(&mut series, &format!("old-{i}"), Reason::Dispatched, at(0));
    }
    for i in 0..1000 {
        publish(
            &mut series,
            &format!("new-{i}"),
            Reason::Dispatched,
            at(400),
        );
    }
    assert!(
        series.recent.len() <= 1100,
        "{} remembered; the old ones ran out",
        series.recent.len()
    );
    assert!(series.recent.contains_key("uid-new-999"));
}
