use super::*;

fn uids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("uid-{i}")).collect()
}

#[test]
fn mirrors_are_confirmed_by_namespace_in_batches() {
    let asked = uids(CONFIRM_AT_ONCE + 1)
        .into_iter()
        .map(|uid| ("ml".to_string(), uid))
        .chain([("batch".to_string(), "uid-b".to_string())]);
    let batches = confirmation_batches(asked);
    let sizes: Vec<(&str, usize)> = batches
        .iter()
        .map(|(ns, uids)| (ns.as_str(), uids.len()))
        .collect();
    assert_eq!(sizes, [("batch", 1), ("ml", CONFIRM_AT_ONCE), ("ml", 1)]);
    let all: Vec<&String> = batches.iter().flat_map(|(_, uids)| uids).collect();
    assert_eq!(all.len(), CONFIRM_AT_ONCE + 2, "every mirror asked once");
    assert!(confirmation_batches([]).is_empty());
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
