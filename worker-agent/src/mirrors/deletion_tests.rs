use std::collections::{HashMap, HashSet};

use super::*;
use crate::mirrors::Pass;
use crate::mirrors::tests::{deleted, only_ml, reaching_nothing};
use crate::mirrors::visit::Visit;

/// A mirror Job of origin UID `uid` in `namespace`, as a list shows it.
fn job_in(namespace: &str, uid: &str) -> Arc<dyn Mirror> {
    let job: Job = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("job-{uid}"), "namespace": namespace, "uid": format!("mirror-{uid}"),
            "labels": {jobrelay_proto::wire::ORIGIN_UID_LABEL: uid}},
    }))
    .unwrap();
    Arc::new(job)
}

/// What a direct read showed: the mirrors of `read`, with `objects`.
fn read(read: &[&str], objects: Vec<(&str, Arc<dyn Mirror>)>) -> Direct {
    let mut by_uid: HashMap<String, Vec<Arc<dyn Mirror>>> = HashMap::new();
    for (uid, object) in objects {
        by_uid.entry(uid.to_string()).or_default().push(object);
    }
    let read: HashSet<String> = read.iter().map(|uid| uid.to_string()).collect();
    Direct {
        snapshot: Snapshot {
            visit: Visit::These(read.clone()),
            objects: by_uid,
            pods: HashMap::new(),
        },
        read,
        unread: Vec::new(),
    }
}

#[tokio::test]
async fn a_mirror_outside_the_watches_steps_on_what_was_read_of_it_never_on_the_empty_caches() {
    let mut mirrors = reaching_nothing(vec![]).await.within(only_ml());
    for (uid, namespace) in [
        ("running", "team-b"),
        ("unread", "team-b"),
        ("emptied", "team-c"),
    ] {
        mirrors.delete(deleted(uid, namespace));
    }
    let findings = mirrors.look(Pass::Full, &mut Vec::new());
    let direct = read(
        &["running", "emptied"],
        vec![("running", job_in("team-b", "running"))],
    );
    let due = mirrors.step_deletions(&findings.snapshot, &direct, Instant::now());

    let deleting: Vec<String> = due
        .job_deletes
        .iter()
        .map(|j| j.object_meta().uid.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        deleting,
        ["mirror-running"],
        "the Job the read showed is deleted"
    );
    let to_confirm: Vec<&str> = due.gone.iter().map(|g| g.uid.as_str()).collect();
    assert_eq!(
        to_confirm,
        ["emptied"],
        "only a mirror whose read showed nothing goes on to be confirmed; an unread one waits"
    );
}

#[tokio::test]
async fn a_mirror_the_watches_cover_steps_on_the_caches() {
    let mut mirrors = reaching_nothing(vec![]).await.within(only_ml());
    mirrors.delete(deleted("watched", "ml"));
    let findings = mirrors.look(Pass::Full, &mut Vec::new());
    // A read of a namespace outside the watches says nothing of this one.
    let direct = read(&["watched"], vec![("watched", job_in("ml", "watched"))]);
    let due = mirrors.step_deletions(&findings.snapshot, &direct, Instant::now());
    assert!(due.job_deletes.is_empty());
    let to_confirm: Vec<&str> = due.gone.iter().map(|g| g.uid.as_str()).collect();
    assert_eq!(
        to_confirm,
        ["watched"],
        "the caches show nothing left: confirm it"
    );
}
