//! The kinds of object jobrelay mirrors, as both sides of the wire name
//! them. A message without a kind means a batch/v1 Job: that is what every
//! side older than `ObjectKind` sent and meant.

use std::fmt;

use crate::v1::ObjectKind;

/// A kind's name as the API server gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KindName {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
}

/// `batch/v1` Job.
pub const JOB: KindName = KindName {
    group: "batch",
    version: "v1",
    kind: "Job",
};

/// `jobset.x-k8s.io/v1alpha2` JobSet.
pub const JOBSET: KindName = KindName {
    group: "jobset.x-k8s.io",
    version: "v1alpha2",
    kind: "JobSet",
};

impl KindName {
    /// The kind on the wire.
    pub fn to_wire(self) -> ObjectKind {
        ObjectKind {
            group: self.group.into(),
            version: self.version.into(),
            kind: self.kind.into(),
        }
    }

    /// Whether `wire` (absent meaning a Job) names this kind.
    pub fn is(self, wire: Option<&ObjectKind>) -> bool {
        match wire {
            None => self == JOB,
            Some(w) if w.kind.is_empty() && w.group.is_empty() && w.version.is_empty() => {
                self == JOB
            }
            Some(w) => w.group == self.group && w.version == self.version && w.kind == self.kind,
        }
    }
}

impl fmt::Display for KindName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_wire(), f)
    }
}

impl fmt::Display for ObjectKind {
    /// `Job.batch/v1`, `JobSet.jobset.x-k8s.io/v1alpha2`, as kubectl names
    /// a resource's kind with its group and version.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind.is_empty() && self.group.is_empty() && self.version.is_empty() {
            return write!(f, "{}.{}/{}", JOB.kind, JOB.group, JOB.version);
        }
        match self.group.as_str() {
            "" => write!(f, "{}/{}", self.kind, self.version),
            group => write!(f, "{}.{group}/{}", self.kind, self.version),
        }
    }
}

/// The kinds an agent's Hello names; none means Job only (an agent older
/// than the field).
pub fn announced(kinds: &[ObjectKind]) -> Vec<ObjectKind> {
    if kinds.is_empty() {
        vec![JOB.to_wire()]
    } else {
        kinds.to_vec()
    }
}

/// Whether an agent that named `kinds` in its Hello mirrors `kind`.
pub fn mirrors(kinds: &[ObjectKind], kind: KindName) -> bool {
    announced(kinds).iter().any(|k| kind.is(Some(k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_kind_is_a_job_and_nothing_else() {
        assert!(JOB.is(None));
        assert!(JOB.is(Some(&ObjectKind::default())));
        assert!(!JOBSET.is(None));
        assert!(!JOBSET.is(Some(&ObjectKind::default())));
        assert!(JOBSET.is(Some(&JOBSET.to_wire())));
        assert!(!JOB.is(Some(&JOBSET.to_wire())));
        let other_version = ObjectKind {
            version: "v1alpha1".into(),
            ..JOBSET.to_wire()
        };
        assert!(!JOBSET.is(Some(&other_version)), "versions are not mixed");
    }

    #[test]
    fn an_agent_that_names_no_kind_mirrors_jobs_only() {
        assert!(mirrors(&[], JOB));
        assert!(!mirrors(&[], JOBSET));
        let both = [JOB.to_wire(), JOBSET.to_wire()];
        assert!(mirrors(&both, JOB) && mirrors(&both, JOBSET));
        assert!(!mirrors(&[JOBSET.to_wire()], JOB));
    }

    #[test]
    fn kinds_read_as_kubectl_names_them() {
        assert_eq!(JOB.to_string(), "Job.batch/v1");
        assert_eq!(JOBSET.to_string(), "JobSet.jobset.x-k8s.io/v1alpha2");
        assert_eq!(ObjectKind::default().to_string(), "Job.batch/v1");
        let pod = ObjectKind {
            group: String::new(),
            version: "v1".into(),
            kind: "Pod".into(),
        };
        assert_eq!(pod.to_string(), "Pod/v1");
    }
}
