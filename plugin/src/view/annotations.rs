//! The `jobrelay.dev/*` annotations on a manager Job, each with what it
//! means in words, for `describe`.

use std::collections::BTreeMap;

use jobrelay_proto::wire::{
    AVOID_UNTIL_ANNOTATION, CLUSTER_KEY, DEACTIVATED_ANNOTATION, DISPATCH_WAITING_ANNOTATION,
    FLAVORS_ANNOTATION, LAST_LOST_MIRROR_ANNOTATION, MIRRORS_LOST_ANNOTATION,
    MOVE_WHEN_UNSCHEDULABLE_ANNOTATION, NOT_ADMITTED_BY_ANNOTATION, PLACEMENT_SEAL_ANNOTATION,
    PODS_ANNOTATION, REMOTE_RETENTION_ANNOTATION, WITHDRAWN_FROM_ANNOTATION,
};
use serde::Serialize;

/// The prefix of jobrelay's annotations.
const PREFIX: &str = "jobrelay.dev/";

/// What each of jobrelay's annotations means, in the order `describe`
/// lists them.
const MEANINGS: &[(&str, &str)] = &[
    (CLUSTER_KEY, "Placed on cluster"),
    (PLACEMENT_SEAL_ANNOTATION, "Placement seal"),
    (DISPATCH_WAITING_ANNOTATION, "Refused, retrying"),
    (PODS_ANNOTATION, "Pods on the worker"),
    (MIRRORS_LOST_ANNOTATION, "Mirrors lost"),
    (LAST_LOST_MIRROR_ANNOTATION, "Last lost mirror (worker UID)"),
    (WITHDRAWN_FROM_ANNOTATION, "Withdrawn from cluster"),
    (AVOID_UNTIL_ANNOTATION, "Cluster avoided until"),
    (NOT_ADMITTED_BY_ANNOTATION, "Not admitted by (worker Kueue)"),
    (
        FLAVORS_ANNOTATION,
        "Kueue flavors (node labels, tolerations)",
    ),
    (DEACTIVATED_ANNOTATION, "Deactivated at"),
    (REMOTE_RETENTION_ANNOTATION, "Keep mirror after finished"),
    (
        MOVE_WHEN_UNSCHEDULABLE_ANNOTATION,
        "Move when unschedulable",
    ),
];

/// One of jobrelay's annotations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Annotation {
    pub key: String,
    /// What it means; the key itself for one this plugin does not know.
    pub label: String,
    pub value: String,
}

/// jobrelay's annotations among `annotations`: the known ones in
/// [`MEANINGS`] order, then any other `jobrelay.dev/` one by key.
pub fn jobrelay(annotations: &BTreeMap<String, String>) -> Vec<Annotation> {
    let known = MEANINGS.iter().filter_map(|(key, label)| {
        annotations.get(*key).map(|value| Annotation {
            key: key.to_string(),
            label: label.to_string(),
            value: value.clone(),
        })
    });
    let other = annotations
        .iter()
        .filter(|(key, _)| key.starts_with(PREFIX))
        .filter(|(key, _)| !MEANINGS.iter().any(|(known, _)| known == key))
        .map(|(key, value)| Annotation {
            key: key.clone(),
            label: key.clone(),
            value: value.clone(),
        });
    known.chain(other).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobrelays_annotations_are_listed_with_their_meaning_and_no_other() {
        let annotations = BTreeMap::from(
            [
                ("jobrelay.dev/mirrors-lost", "1"),
                ("jobrelay.dev/cluster", "worker-1"),
                ("jobrelay.dev/something-new", "x"),
                ("kueue.x-k8s.io/queue-name", "team-a"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let listed: Vec<(String, String)> = jobrelay(&annotations)
            .into_iter()
            .map(|a| (a.label, a.value))
            .collect();
        assert_eq!(
            listed,
            [
                ("Placed on cluster", "worker-1"),
                ("Mirrors lost", "1"),
                ("jobrelay.dev/something-new", "x"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }

    #[test]
    fn every_meaning_is_of_a_jobrelay_annotation() {
        for (key, _) in MEANINGS {
            assert!(key.starts_with(PREFIX), "{key}");
        }
    }
}
