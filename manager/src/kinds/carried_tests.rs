use super::*;

fn job(completions: Option<i32>, parallelism: i32, indexed: bool, shown: (i32, i32)) -> Job {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            "completionMode": if indexed { "Indexed" } else { "NonIndexed" },
            "template": {},
        },
        "status": {"succeeded": shown.0, "failed": shown.1},
    }))
    .expect("a Job")
}

fn carried(succeeded: i32, failed: i32) -> Carried {
    Carried { succeeded, failed }
}

#[test]
fn a_job_placed_again_carries_what_it_shows() {
    #[rustfmt::skip]
    let cases = [
        ("first placement",           job(Some(4), 2, false, (0, 0)), None),
        ("two of four succeeded",     job(Some(4), 2, false, (2, 0)), Some(carried(2, 0))),
        ("failures are carried too",  job(Some(4), 2, false, (1, 3)), Some(carried(1, 3))),
        ("never all completions",     job(Some(4), 2, false, (9, 0)), Some(carried(3, 0))),
        ("no completions: no success",job(None, 2, false, (1, 1)),    Some(carried(0, 1))),
        ("an Indexed Job, nothing",   job(Some(4), 2, true, (2, 1)),  None),
    ];
    for (case, job, expected) in cases {
        assert_eq!(Carried::at_placement(&job), expected, "{case}");
    }
}

#[test]
fn the_record_reads_back_and_a_bad_one_names_the_annotation() {
    let mut job = job(Some(4), 2, false, (0, 0));
    assert_eq!(Carried::of(&job), Ok(None), "none recorded");
    let record = carried(2, 1);
    job.metadata.annotations = Some([(CARRIED_ANNOTATION.to_string(), record.value())].into());
    assert_eq!(Carried::of(&job), Ok(Some(record)));
    for bad in ["succeeded", "succeeded=-1", "ran=2", "succeeded=two"] {
        job.metadata.annotations = Some([(CARRIED_ANNOTATION.to_string(), bad.to_string())].into());
        let error = Carried::of(&job).expect_err(bad);
        assert!(error.contains(CARRIED_ANNOTATION), "{error}");
    }
}

#[test]
fn the_new_mirror_is_asked_only_for_what_is_left() {
    let spec = |completions: Option<i32>, parallelism: i32, backoff: Option<i32>| JobSpec {
        completions,
        parallelism: Some(parallelism),
        backoff_limit: backoff,
        ..JobSpec::default()
    };
    #[rustfmt::skip]
    let cases = [
        ("nothing carried",             carried(0, 0), spec(Some(4), 2, None),    spec(Some(4), 2, None)),
        ("completions left",            carried(2, 0), spec(Some(4), 2, None),    spec(Some(2), 2, None)),
        ("parallelism no more than left", carried(3, 0), spec(Some(4), 2, None),  spec(Some(1), 1, None)),
        ("the default limit less failures", carried(0, 2), spec(Some(4), 2, None), spec(Some(4), 2, Some(4))),
        ("a limit never below zero",    carried(0, 5), spec(Some(4), 2, Some(3)), spec(Some(4), 2, Some(0))),
        ("no completions to lower",     carried(0, 1), spec(None, 3, Some(2)),    spec(None, 3, Some(1))),
    ];
    for (case, carried, mut mirror, expected) in cases {
        carried.leave_to(&mut mirror);
        assert_eq!(mirror, expected, "{case}");
    }
}

#[test]
fn the_job_shows_what_was_carried_plus_what_the_mirror_reports() {
    let mut reported = JobStatus {
        active: Some(2),
        succeeded: Some(1),
        ..JobStatus::default()
    };
    carried(2, 1).add_to(&mut reported);
    assert_eq!(reported.succeeded, Some(3));
    assert_eq!(reported.failed, Some(1));
    assert_eq!(reported.active, Some(2), "what runs is the mirror's own");
    let mut untouched = JobStatus::default();
    Carried::default().add_to(&mut untouched);
    assert_eq!(untouched, JobStatus::default());
}

#[test]
fn only_an_indexed_job_as_wide_as_its_completions_may_show_fewer_succeeded() {
    assert!(succeeded_may_fall(&job(Some(4), 4, true, (0, 0))));
    assert!(!succeeded_may_fall(&job(Some(4), 2, true, (0, 0))));
    assert!(!succeeded_may_fall(&job(Some(4), 4, false, (0, 0))));
}
