//! Mirrors lost behind jobrelay's back: the pure judgement over one desired
//! mirror's Job and Pods as the worker shows them.
//!
//! Anything can remove a mirror Job — `kubectl delete` with any propagation
//! policy, a worker TTL or policy engine, a namespace deletion — and an
//! Orphan delete leaves its Pods running with no owner. The manager Job is
//! the source of truth, so such a mirror is *lost*: the agent deletes what is
//! left of it, Pods first, and tells the manager, which may run it again.
//! A live mirror must also own every Pod of its origin UID; any other such
//! Pod is a *stray* and is deleted once it outlived the orphan grace.

/// A Job of the mirror's origin UID, as the worker shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSeen {
    pub uid: String,
    /// Has a deletionTimestamp.
    pub deleting: bool,
}

/// A Pod of the mirror's origin UID, as the worker shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSeen {
    pub uid: String,
    /// UID of the Job named as the Pod's controller, if any (an Orphan delete
    /// removes it).
    pub owner: Option<String>,
    /// Has a deletionTimestamp.
    pub deleting: bool,
}

/// What to make of a desired mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LossVerdict {
    /// Live and owning every Pod of its origin UID, or not created yet.
    Intact {
        /// The live mirror's UID, to remember it by.
        live: Option<String>,
    },
    /// Live, but these Pods (UIDs) of its origin UID are not its own.
    Strays { live: String, pods: Vec<String> },
    /// Removed, or being removed, by someone else.
    Lost {
        /// The lost Job's UID, when known.
        mirror_uid: Option<String>,
        /// What was seen, in words.
        observed: String,
    },
}

/// Judges a desired mirror the agent is not deleting itself. `seen` is the
/// UID of the mirror Job the agent last saw live, if it saw one: a Job that
/// was seen and is gone was lost, while no Job and no sign of one (the apply
/// is in flight, or the Job's watch event has not arrived) is not.
pub fn judge(jobs: &[JobSeen], pods: &[PodSeen], seen: Option<&str>) -> LossVerdict {
    let remaining = pods.iter().filter(|p| !p.deleting).count();
    if let Some(job) = jobs.iter().find(|j| j.deleting) {
        return LossVerdict::Lost {
            mirror_uid: Some(job.uid.clone()),
            observed: format!(
                "the mirror Job is being deleted by someone else ({} Pod(s) not yet deleted)",
                remaining
            ),
        };
    }
    if let Some(live) = jobs.first() {
        let pods: Vec<String> = pods
            .iter()
            .filter(|p| p.owner.as_deref() != Some(live.uid.as_str()))
            .map(|p| p.uid.clone())
            .collect();
        let live = live.uid.clone();
        return if pods.is_empty() {
            LossVerdict::Intact { live: Some(live) }
        } else {
            LossVerdict::Strays { live, pods }
        };
    }
    // No Job. Pods that lost their owner (Orphan) or are being deleted
    // (Background cascade) prove there was one, even if this agent never saw
    // it (it was away when the Job went).
    let traces = pods.iter().any(|p| p.owner.is_none() || p.deleting);
    if seen.is_none() && !traces {
        return LossVerdict::Intact { live: None };
    }
    let mirror_uid = seen
        .map(str::to_string)
        .or_else(|| pods.iter().find_map(|p| p.owner.clone()));
    let observed = match (pods.len(), remaining) {
        (0, _) => "the mirror Job was deleted, with its Pods".to_string(),
        (n, 0) => format!("the mirror Job was deleted; its {n} Pod(s) are terminating"),
        (n, r) => format!(
            "the mirror Job was deleted without its Pods; {r} of its {n} Pod(s) were left running"
        ),
    };
    LossVerdict::Lost {
        mirror_uid,
        observed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(uid: &str, deleting: bool) -> JobSeen {
        JobSeen {
            uid: uid.into(),
            deleting,
        }
    }

    fn pod(uid: &str, owner: Option<&str>, deleting: bool) -> PodSeen {
        PodSeen {
            uid: uid.into(),
            owner: owner.map(str::to_string),
            deleting,
        }
    }

    #[test]
    fn a_live_mirror_owning_its_pods_is_intact() {
        assert_eq!(
            judge(&[job("j1", false)], &[pod("p1", Some("j1"), false)], None),
            LossVerdict::Intact {
                live: Some("j1".into())
            }
        );
    }

    #[test]
    fn nothing_yet_is_not_a_loss() {
        assert_eq!(judge(&[], &[], None), LossVerdict::Intact { live: None });
        // A Pod whose owner the Job watch has not shown yet is no proof.
        assert_eq!(
            judge(&[], &[pod("p1", Some("j1"), false)], None),
            LossVerdict::Intact { live: None }
        );
    }

    #[test]
    fn a_seen_mirror_that_is_gone_was_lost_even_without_pods() {
        let verdict = judge(&[], &[], Some("j1"));
        assert_eq!(
            verdict,
            LossVerdict::Lost {
                mirror_uid: Some("j1".into()),
                observed: "the mirror Job was deleted, with its Pods".into()
            }
        );
    }

    #[test]
    fn an_orphan_delete_is_seen_from_its_ownerless_pods() {
        let LossVerdict::Lost {
            mirror_uid,
            observed,
        } = judge(&[], &[pod("p1", None, false), pod("p2", None, false)], None)
        else {
            panic!("not lost");
        };
        assert_eq!(mirror_uid, None, "nothing names the lost Job");
        assert!(
            observed.contains("2 of its 2 Pod(s) were left running"),
            "{observed}"
        );
    }

    #[test]
    fn a_background_delete_is_seen_from_terminating_pods() {
        let verdict = judge(&[], &[pod("p1", Some("j1"), true)], None);
        assert_eq!(
            verdict,
            LossVerdict::Lost {
                mirror_uid: Some("j1".into()),
                observed: "the mirror Job was deleted; its 1 Pod(s) are terminating".into()
            }
        );
    }

    #[test]
    fn a_foreground_delete_by_someone_else_is_a_loss_before_the_job_goes() {
        let verdict = judge(
            &[job("j1", true)],
            &[pod("p1", Some("j1"), false)],
            Some("j1"),
        );
        assert!(
            matches!(&verdict, LossVerdict::Lost { mirror_uid: Some(uid), .. } if uid == "j1"),
            "{verdict:?}"
        );
    }

    #[test]
    fn pods_the_live_mirror_does_not_own_are_strays() {
        let verdict = judge(
            &[job("j2", false)],
            &[
                pod("old", None, false),
                pod("mine", Some("j2"), false),
                pod("prev", Some("j1"), true),
            ],
            Some("j1"),
        );
        assert_eq!(
            verdict,
            LossVerdict::Strays {
                live: "j2".into(),
                pods: vec!["old".into(), "prev".into()]
            }
        );
    }
}
