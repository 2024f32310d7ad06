//! Objects that carry a mirror's origin UID outside the mirror's namespace
//! (its home, which the manager names): a worker user's copy of jobrelay's
//! labels, never the mirror. A pass leaves them out of everything it
//! decides — status, loss, deletion, the orphan sweep — and they are left
//! alone; each is logged once when first seen and counted in
//! `jobrelay_agent_foreign_objects`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use prometheus_client::metrics::gauge::Gauge;
use tracing::warn;

use super::{Mirrors, Snapshot, Visit};

impl Mirrors {
    /// The namespace of the mirror of `uid`: the one the manager named last,
    /// or, once a later DesiredSet no longer names the mirror, that of its
    /// deletion under way.
    fn home_of(&self, uid: &str) -> Option<&str> {
        self.desired.home_of(uid).or_else(|| {
            let deletion = self.records.get(uid)?.work.deletion()?;
            Some(deletion.namespace.as_str()).filter(|n| !n.is_empty())
        })
    }

    /// Sets apart from `snapshot` every object and Pod away from its
    /// mirror's home, and logs each one the first time it is seen.
    pub(super) fn set_apart_foreign(&mut self, snapshot: &mut Snapshot) {
        let mut found: HashMap<String, BTreeSet<String>> = HashMap::new();
        for (uid, objects) in &mut snapshot.objects {
            let home = self.home_of(uid);
            for object in away_from_home(objects, home, |o| o.object_meta()) {
                let object = describe(object.kind_name().kind, object.object_meta());
                found.entry(uid.clone()).or_default().insert(object);
            }
        }
        for (uid, pods) in &mut snapshot.pods {
            let home = self.home_of(uid);
            for pod in away_from_home(pods, home, |p| p.meta()) {
                let pod = describe("Pod", pod.meta());
                found.entry(uid.clone()).or_default().insert(pod);
            }
        }
        snapshot.objects.retain(|_, objects| !objects.is_empty());
        snapshot.pods.retain(|_, pods| !pods.is_empty());
        let looked_at = match &snapshot.visit {
            Visit::Everything => None,
            Visit::These(uids) => Some(uids),
        };
        for (uid, object) in self.foreign.saw(looked_at, found) {
            let home = self.home_of(&uid).unwrap_or_default();
            warn!(%uid, %home, %object, "an object carries a mirror's origin UID outside the mirror's namespace: not the mirror's, left alone");
        }
    }
}

/// Of one mirror's `items`, keeps those in its `home` (all of them when it
/// has none) and returns the others.
pub(super) fn away_from_home<T: ?Sized>(
    items: &mut Vec<Arc<T>>,
    home: Option<&str>,
    meta: impl Fn(&T) -> &ObjectMeta,
) -> Vec<Arc<T>> {
    let Some(home) = home else {
        return Vec::new();
    };
    let (kept, away): (Vec<_>, Vec<_>) = items
        .drain(..)
        .partition(|item| meta(item).namespace.as_deref() == Some(home));
    *items = kept;
    away
}

/// The foreign objects seen, by origin UID, as `Kind namespace/name`.
#[derive(Debug, Default)]
pub(super) struct Foreign {
    by_uid: HashMap<String, BTreeSet<String>>,
    pub gauge: Gauge,
}

impl Foreign {
    /// What a pass found away from home among the mirrors it looked at
    /// (`looked_at`; `None`: every mirror): replaces what was known of
    /// them, and returns each object not seen before, with its origin UID.
    pub fn saw(
        &mut self,
        looked_at: Option<&HashSet<String>>,
        found: HashMap<String, BTreeSet<String>>,
    ) -> Vec<(String, String)> {
        match looked_at {
            None => self.by_uid.retain(|uid, _| found.contains_key(uid)),
            Some(uids) => self
                .by_uid
                .retain(|uid, _| !uids.contains(uid) || found.contains_key(uid)),
        }
        let mut new = Vec::new();
        for (uid, objects) in found {
            let known = self.by_uid.entry(uid.clone()).or_default();
            new.extend(
                objects
                    .difference(known)
                    .map(|object| (uid.clone(), object.clone())),
            );
            *known = objects;
        }
        self.gauge
            .set(self.by_uid.values().map(BTreeSet::len).sum::<usize>() as i64);
        new
    }
}

/// How an object is named in the log: `Job team-a/train`.
pub(super) fn describe(kind: &str, meta: &ObjectMeta) -> String {
    format!(
        "{kind} {}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(namespace: &str, name: &str) -> Arc<ObjectMeta> {
        Arc::new(ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            ..ObjectMeta::default()
        })
    }

    fn names(items: &[Arc<ObjectMeta>]) -> Vec<&str> {
        items.iter().filter_map(|m| m.name.as_deref()).collect()
    }

    #[test]
    fn objects_outside_a_mirrors_home_are_set_apart() {
        let mut items = vec![meta("team-b", "mirror"), meta("team-a", "copy")];
        let away = away_from_home(&mut items, Some("team-b"), |m| m);
        assert_eq!(names(&items), ["mirror"]);
        assert_eq!(names(&away), ["copy"]);
    }

    #[test]
    fn a_mirror_without_a_home_keeps_everything() {
        let mut items = vec![meta("team-b", "mirror"), meta("team-a", "copy")];
        assert!(away_from_home(&mut items, None, |m| m).is_empty());
        assert_eq!(names(&items), ["mirror", "copy"]);
    }

    fn found(entries: &[(&str, &[&str])]) -> HashMap<String, BTreeSet<String>> {
        entries
            .iter()
            .map(|(uid, objects)| {
                (
                    uid.to_string(),
                    objects.iter().map(|o| o.to_string()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn each_foreign_object_is_new_once_and_counted_while_it_stays() {
        let mut foreign = Foreign::default();
        let new = foreign.saw(None, found(&[("u1", &["Job a/x", "Pod a/x-1"])]));
        assert_eq!(new.len(), 2);
        assert_eq!(foreign.gauge.get(), 2);
        let new = foreign.saw(None, found(&[("u1", &["Job a/x", "Pod a/x-1"])]));
        assert!(new.is_empty(), "seen before: not new");
        let new = foreign.saw(None, found(&[("u1", &["Job a/x"])]));
        assert!(new.is_empty());
        assert_eq!(foreign.gauge.get(), 1, "the Pod went");
    }

    #[test]
    fn a_pass_over_some_mirrors_changes_only_what_it_looked_at() {
        let mut foreign = Foreign::default();
        foreign.saw(None, found(&[("u1", &["Job a/x"]), ("u2", &["Job a/y"])]));
        let looked_at: HashSet<String> = ["u1".to_string()].into();
        let new = foreign.saw(Some(&looked_at), HashMap::new());
        assert!(new.is_empty());
        assert_eq!(foreign.gauge.get(), 1, "u1's copy is gone, u2's stays");
        foreign.saw(None, HashMap::new());
        assert_eq!(
            foreign.gauge.get(),
            0,
            "a look at everything forgets the rest"
        );
    }
}
