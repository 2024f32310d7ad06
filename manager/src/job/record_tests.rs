//! The record of where a Job runs: which seals open, and each case of
//! [`judge`].

use super::*;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).expect("a valid moment")
}

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

/// A key sealing records since `at(100)`.
fn sealer() -> Sealer {
    Sealer::new(KEY, at(100))
}

#[test]
fn a_seal_opens_for_its_job_only_and_only_under_its_key() {
    let sealer = sealer();
    let seal = sealer.seal("uid-a", "worker-1").unwrap();
    assert!(
        seal.starts_with("v1:") && seal.ends_with(":worker-1"),
        "{seal}"
    );
    assert_eq!(sealer.open("uid-a", &seal), Some("worker-1"));
    assert_eq!(sealer.open("uid-b", &seal), None, "copied to another Job");
    let moved = seal.replace(":worker-1", ":worker-2");
    assert_eq!(
        sealer.open("uid-a", &moved),
        None,
        "another cluster written in"
    );
    let other_key = Sealer::new(b"another key, another manager!!!!", at(100));
    assert_eq!(other_key.open("uid-a", &seal), None);
    for garbage in [
        "",
        "v1",
        "v1::worker-1",
        "v2:AAAA:worker-1",
        "v1:!!:worker-1",
    ] {
        assert_eq!(sealer.open("uid-a", garbage), None, "{garbage:?}");
    }
}

#[test]
fn a_sealed_record_places_the_job_whatever_the_plain_annotation_says() {
    let sealer = sealer();
    let seal = sealer.seal("uid-a", "worker-1").unwrap();
    let judged = |annotated| judge(&sealer, "uid-a", Some(at(500)), annotated, Some(&seal));
    assert_eq!(
        judged(Some("worker-1")),
        Record::Placed {
            cluster: "worker-1".into(),
            claimed: None
        }
    );
    assert_eq!(
        judged(Some("worker-2")),
        Record::Placed {
            cluster: "worker-1".into(),
            claimed: Some("worker-2".into())
        },
        "changed by a user: jobrelay's record stands, and is written back"
    );
    assert_eq!(
        judged(None),
        Record::Placed {
            cluster: "worker-1".into(),
            claimed: Some(String::new())
        },
        "removed by a user: written back"
    );
}

#[test]
fn an_unsealed_record_is_trusted_only_on_a_job_older_than_sealing() {
    let sealer = sealer();
    let old = Record::Unsealed {
        cluster: "worker-1".into(),
    };
    assert_eq!(
        judge(&sealer, "uid-a", Some(at(5)), Some("worker-1"), None),
        old,
        "placed by a jobrelay without seals"
    );
    let copied = sealer.seal("uid-b", "worker-1").unwrap();
    assert_eq!(
        judge(
            &sealer,
            "uid-a",
            Some(at(5)),
            Some("worker-1"),
            Some(&copied)
        ),
        old,
        "a seal that does not open changes nothing on an old Job (a key made anew)"
    );
    let forged = Record::Forged {
        claimed: "worker-1".into(),
    };
    for seal in [None, Some(copied.as_str())] {
        assert_eq!(
            judge(&sealer, "uid-a", Some(at(500)), Some("worker-1"), seal),
            forged,
            "created since: jobrelay would have sealed it"
        );
    }
    assert_eq!(
        judge(&sealer, "uid-a", None, Some("worker-1"), None),
        forged,
        "no creation time: not trusted"
    );
}

#[test]
fn until_records_are_sealed_every_unsealed_record_is_an_earlier_jobrelays() {
    let sealer = Sealer::default();
    assert_eq!(sealer.since(), None);
    assert_eq!(
        sealer.seal("uid-a", "worker-1"),
        None,
        "nothing to seal with"
    );
    let old = Record::Unsealed {
        cluster: "worker-1".into(),
    };
    assert_eq!(
        judge(&sealer, "uid-a", Some(at(500)), Some("worker-1"), None),
        old
    );
    let copy = sealer.clone();
    sealer.seal_since(KEY, at(100));
    assert_eq!(copy.since(), Some(at(100)), "shared by every copy");
    assert_eq!(
        judge(&copy, "uid-a", Some(at(500)), Some("worker-1"), None),
        Record::Forged {
            claimed: "worker-1".into()
        }
    );
}

#[test]
fn no_record_is_no_placement() {
    let sealer = sealer();
    assert_eq!(
        judge(&sealer, "uid-a", Some(at(500)), None, None),
        Record::Unplaced
    );
    assert_eq!(
        judge(
            &sealer,
            "uid-a",
            Some(at(500)),
            None,
            Some("v1:AAAA:worker-1")
        ),
        Record::Unplaced,
        "a seal that does not open, and nothing claimed"
    );
}

#[test]
fn the_note_says_what_was_claimed_where_the_job_runs_and_how_to_choose() {
    let kept = restored_note("worker-2", Some("worker-1"));
    assert!(
        kept.starts_with(
            "annotation jobrelay.dev/cluster says \"worker-2\", which jobrelay did not write"
        ),
        "{kept}"
    );
    assert!(kept.contains("the Job stays on cluster worker-1, and the annotation is written back"));
    assert!(kept.ends_with(
        "label the Job jobrelay.dev/cluster when creating it (the cluster's rules still apply)"
    ));
    let removed = restored_note("", Some("worker-1"));
    assert!(
        removed.starts_with("annotation jobrelay.dev/cluster was removed"),
        "{removed}"
    );
    let ignored = restored_note("worker-9", None);
    assert!(
        ignored.contains("the Job is placed by jobrelay's rules, and the annotation is removed"),
        "{ignored}"
    );
}

#[test]
fn the_cache_keeps_only_jobrelays_record_and_marks_what_to_write_back() {
    use k8s_openapi::api::batch::v1::Job;
    let sealer = sealer();
    let job = |annotations: &[(&str, &str)]| -> Job {
        let annotations: std::collections::BTreeMap<_, _> = annotations.iter().copied().collect();
        serde_json::from_value(serde_json::json!({"metadata": {
            "uid": "uid-a",
            "creationTimestamp": at(500).to_string(),
            "annotations": annotations,
        }}))
        .expect("a Job")
    };
    let seal = sealer.seal("uid-a", "worker-1").unwrap();
    let mut moved = job(&[(CLUSTER_KEY, "worker-2"), (SEAL_ANNOTATION, &seal)]);
    for_cache(&mut moved, &sealer);
    let cached = moved.metadata.annotations.clone().unwrap();
    assert_eq!(cached[CLUSTER_KEY], "worker-1", "jobrelay's record");
    assert_eq!(claimed(&moved), Some("worker-2"));
    assert_eq!(
        to_restore(&moved, &sealer),
        Some(Restore {
            claimed: "worker-2",
            placed: Some("worker-1".into())
        }),
        "judged again from what the mark kept"
    );
    let mut forged = job(&[(CLUSTER_KEY, "worker-2")]);
    for_cache(&mut forged, &sealer);
    assert_eq!(
        forged
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .get(CLUSTER_KEY),
        None
    );
    assert_eq!(claimed(&forged), Some("worker-2"));
    let mut sealed = job(&[(CLUSTER_KEY, "worker-1"), (SEAL_ANNOTATION, &seal)]);
    for_cache(&mut sealed, &sealer);
    assert_eq!(claimed(&sealed), None, "nothing to write back");
    assert_eq!(to_restore(&sealed, &sealer), None);
    assert_eq!(
        to_restore(&forged, &sealer),
        Some(Restore {
            claimed: "worker-2",
            placed: None
        }),
        "no record: the fleet is asked"
    );

    // Cached by a replica that did not know the key yet (a follower
    // started before the first leader made it): every record was trusted
    // and marked; judged again once it knows the key, a record that is
    // jobrelay's as it stands needs no write — the Job goes on.
    let keyless = Sealer::default();
    let mut early = job(&[(CLUSTER_KEY, "worker-1"), (SEAL_ANNOTATION, &seal)]);
    for_cache(&mut early, &keyless);
    assert_eq!(claimed(&early), Some("worker-1"), "marked while keyless");
    assert_eq!(to_restore(&early, &sealer), None);
    let mut early_forged = job(&[(CLUSTER_KEY, "worker-2")]);
    for_cache(&mut early_forged, &keyless);
    assert_eq!(
        to_restore(&early_forged, &sealer),
        Some(Restore {
            claimed: "worker-2",
            placed: None
        }),
        "a forged record trusted while keyless is removed once the key is known"
    );
}
