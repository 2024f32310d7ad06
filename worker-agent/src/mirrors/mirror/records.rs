//! The records of every mirror the agent holds something of, by origin
//! UID, with what the passes ask of them at hand: which mirrors are being
//! deleted, which have an apply waiting, which have stray Pods. Every change
//! of a record goes through [`Records::update`], which keeps those in step
//! with the records and forgets a record that holds nothing — so a pass
//! costs what it looks at, not every mirror held, and mirrors confirmed gone
//! leave nothing behind.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::{Deletion, Record, Work};

#[derive(Debug, Default)]
pub(in crate::mirrors) struct Records {
    by_uid: HashMap<String, Record>,
    /// Of `by_uid`, those being deleted.
    deleting: HashSet<String>,
    /// Of `by_uid`, those with an apply waiting.
    waiting: HashSet<String>,
    /// Of `by_uid`, those with stray Pods.
    with_strays: HashSet<String>,
}

impl Records {
    pub fn get(&self, uid: &str) -> Option<&Record> {
        self.by_uid.get(uid)
    }

    /// Changes the record of `uid` (a new one if there is none) by `change`.
    pub fn update<T>(&mut self, uid: &str, change: impl FnOnce(&mut Record) -> T) -> T {
        let record = match self.by_uid.get_mut(uid) {
            Some(record) => record,
            None => self.by_uid.entry(uid.to_string()).or_default(),
        };
        let changed = change(record);
        self.reindex(uid);
        changed
    }

    /// Changes every record by `change`.
    pub fn update_all(&mut self, mut change: impl FnMut(&mut Record)) {
        self.by_uid.values_mut().for_each(&mut change);
        let uids: Vec<String> = self.by_uid.keys().cloned().collect();
        for uid in uids {
            self.reindex(&uid);
        }
    }

    /// Takes the stray Pods of `uids`, or of every mirror.
    pub fn take_strays(
        &mut self,
        uids: Option<&HashSet<String>>,
    ) -> HashMap<String, HashMap<String, Instant>> {
        let uids: Vec<String> = match uids {
            Some(uids) => uids
                .iter()
                .filter(|uid| self.with_strays.contains(*uid))
                .cloned()
                .collect(),
            None => self.with_strays.iter().cloned().collect(),
        };
        uids.into_iter()
            .map(|uid| {
                let strays = self.update(&uid, |r| std::mem::take(&mut r.strays));
                (uid, strays)
            })
            .collect()
    }

    /// Every mirror the agent holds something of.
    pub fn uids(&self) -> impl Iterator<Item = &String> {
        self.by_uid.keys()
    }

    pub fn is_deleting(&self, uid: &str) -> bool {
        self.deleting.contains(uid)
    }

    /// The mirrors being deleted (or waiting for their Pods to go).
    pub fn deleting(&self) -> impl Iterator<Item = &String> {
        self.deleting.iter()
    }

    pub fn deleting_count(&self) -> usize {
        self.deleting.len()
    }

    /// The deletion under way of `uid`, whether or not it waits for an
    /// apply's answer. What it changes leaves the mirror being deleted.
    pub fn deletion_mut(&mut self, uid: &str) -> Option<&mut Deletion> {
        self.by_uid.get_mut(uid)?.work.deletion_mut()
    }

    /// Runs `look` over every deletion under way. What it changes leaves
    /// the mirrors being deleted.
    pub fn each_deletion(&mut self, mut look: impl FnMut(&str, &mut Deletion)) {
        for uid in &self.deleting {
            if let Some(deletion) = self.by_uid.get_mut(uid).and_then(|r| r.work.deletion_mut()) {
                look(uid, deletion);
            }
        }
    }

    /// The deletion of `uid` to move forward now: none while an apply is out.
    pub fn deletion_to_drive(&mut self, uid: &str) -> Option<&mut Deletion> {
        self.by_uid.get_mut(uid)?.work.deletion_to_drive()
    }

    /// The mirrors whose waiting apply is due at `now`.
    pub fn applies_due(&self, now: Instant) -> Vec<String> {
        self.waiting
            .iter()
            .filter(|uid| self.by_uid.get(*uid).is_some_and(|r| r.work.apply_due(now)))
            .cloned()
            .collect()
    }

    /// The mirrors waiting on the clock: being deleted, or with a stray Pod
    /// within its grace.
    pub fn on_the_clock(&self) -> impl Iterator<Item = &String> {
        self.deleting.iter().chain(&self.with_strays)
    }

    /// Brings what is at hand in step with the record of `uid`, and forgets
    /// it if it holds nothing.
    fn reindex(&mut self, uid: &str) {
        let Some(record) = self.by_uid.get(uid) else {
            return;
        };
        let (deleting, waiting) = (
            record.work.is_deleting(),
            matches!(record.work, Work::Waiting(_)),
        );
        let with_strays = !record.strays.is_empty();
        if record.holds_nothing() {
            self.by_uid.remove(uid);
        }
        mark(&mut self.deleting, uid, deleting);
        mark(&mut self.waiting, uid, waiting);
        mark(&mut self.with_strays, uid, with_strays);
    }
}

fn mark(set: &mut HashSet<String>, uid: &str, member: bool) {
    match member {
        true if !set.contains(uid) => {
            set.insert(uid.to_string());
        }
        false => {
            set.remove(uid);
        }
        true => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use backon::ExponentialBuilder;
    use jobrelay_proto::v1::ApplyMirror;

    use super::*;
    use crate::mirrors::mirror::{ApplyRetry, Event};

    fn on(records: &mut Records, event: Event) {
        let retry = ApplyRetry {
            delays: ExponentialBuilder::default(),
            max: Duration::from_secs(60),
        };
        records.update("u1", |r| r.on(event, &retry));
    }

    fn apply() -> Event {
        Event::Apply(ApplyMirror {
            origin_uid: "u1".into(),
            revision: 1,
            ..ApplyMirror::default()
        })
    }

    #[test]
    fn an_apply_taken_leaves_nothing_behind() {
        let (mut records, now) = (Records::default(), Instant::now());
        on(&mut records, apply());
        assert_eq!(records.applies_due(now), ["u1"]);
        on(&mut records, Event::ApplyDue(now));
        assert!(records.applies_due(now).is_empty(), "out, not sent twice");
        on(
            &mut records,
            Event::Answered {
                revision: 1,
                result: Ok(()),
                now,
            },
        );
        assert!(records.get("u1").is_none(), "{records:?}");
    }

    #[test]
    fn a_mirror_confirmed_gone_leaves_nothing_behind() {
        let mut records = Records::default();
        let deletion = Deletion::new("ml".into(), "job-u1".into(), None, None);
        on(&mut records, Event::Found(deletion));
        assert!(records.is_deleting("u1"));
        assert_eq!(records.deleting_count(), 1);
        assert_eq!(records.on_the_clock().collect::<Vec<_>>(), ["u1"]);
        on(&mut records, Event::Gone);
        assert!(
            records.get("u1").is_none() && records.deleting_count() == 0,
            "{records:?}"
        );
    }

    #[test]
    fn stray_pods_taken_leave_nothing_behind() {
        let mut records = Records::default();
        records.update("u1", |r| {
            r.strays = [("p1".to_string(), Instant::now())].into()
        });
        assert_eq!(records.on_the_clock().collect::<Vec<_>>(), ["u1"]);
        let taken = records.take_strays(None);
        assert_eq!(taken["u1"].len(), 1);
        assert!(records.get("u1").is_none() && records.on_the_clock().next().is_none());
    }
}
