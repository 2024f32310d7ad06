use super::*;
use jobrelay_proto::kinds::JOBSET;

fn uids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("uid-{i}")).collect()
}

fn gone(namespace: &str, kind: Option<KindName>, uid: &str) -> Gone {
    Gone {
        namespace: namespace.into(),
        kind,
        uid: uid.into(),
    }
}

#[test]
fn mirrors_are_confirmed_by_namespace_in_batches() {
    let asked = uids(CONFIRM_AT_ONCE + 1)
        .into_iter()
        .map(|uid| gone("ml", Some(JOB), &uid))
        .chain([gone("batch", Some(JOB), "uid-b")]);
    let batches = confirmation_batches(asked);
    let sizes: Vec<(&str, usize)> = batches
        .iter()
        .map(|b| (b.namespace.as_str(), b.uids.len()))
        .collect();
    assert_eq!(sizes, [("batch", 1), ("ml", CONFIRM_AT_ONCE), ("ml", 1)]);
    let all: Vec<&String> = batches.iter().flat_map(|b| &b.uids).collect();
    assert_eq!(all.len(), CONFIRM_AT_ONCE + 2, "every mirror asked once");
    assert!(confirmation_batches([]).is_empty());
}

#[test]
fn jobs_mirrors_are_confirmed_without_a_jobset_list() {
    let batches = confirmation_batches([gone("ml", Some(JOB), "job")]);
    assert_eq!(batches.len(), 1);
    assert!(batches[0].jobs_only);
}

#[test]
fn a_jobset_or_a_mirror_of_unknown_kind_is_confirmed_with_one() {
    let batches = confirmation_batches([
        gone("ml", Some(JOBSET), "set"),
        gone("ml", None, "orphan"),
        gone("ml", Some(JOB), "job"),
    ]);
    let scopes: Vec<(bool, Vec<&str>)> = batches
        .iter()
        .map(|b| (b.jobs_only, b.uids.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        scopes,
        [(false, vec!["set", "orphan"]), (true, vec!["job"])],
        "a batch holds one scope of lists"
    );
}

#[test]
fn one_selector_names_every_mirror_of_the_batch_and_the_origin() {
    assert_eq!(
        selector_of("east", &uids(2)),
        format!("{ORIGIN_LABEL}=east,{ORIGIN_UID_LABEL} in (uid-0,uid-1)")
    );
}

#[test]
fn a_mirror_is_gone_only_while_nothing_listed_carries_its_uid() {
    let labelled = |uid: &str| ObjectMeta {
        labels: Some([(ORIGIN_UID_LABEL.to_string(), uid.to_string())].into()),
        ..ObjectMeta::default()
    };
    let listed = [labelled("uid-1"), labelled("uid-1"), ObjectMeta::default()];
    assert_eq!(still_gone(&uids(3), &listed), ["uid-0", "uid-2"]);
    assert_eq!(still_gone(&uids(2), []), ["uid-0", "uid-1"]);
}

#[test]
fn a_namespace_that_cannot_be_read_is_warned_of_once_in_a_while_not_on_every_pass() {
    let (every, start) = (Duration::from_secs(30), Instant::now());
    let rows = [
        // (last logged, seconds later, due)
        (None, 0, true),
        (Some(start), 1, false),
        (Some(start), 29, false),
        (Some(start), 30, true),
    ];
    for (last, later, due) in rows {
        let now = start + Duration::from_secs(later);
        assert_eq!(log_due(last, now, every), due, "{last:?} +{later}s");
    }
}
