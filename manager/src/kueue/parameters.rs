//! A check's `parameters` as a pure decision: which WorkerClusters they let
//! its Workloads use ([`allowed`]).

use std::collections::BTreeSet;

use super::types::Parameters;
use crate::clusters::worker_cluster_set::{SetPlacement, WorkerClusterSetSpec};

/// Which WorkerClusters a check lets its Workloads use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// No `parameters`: every WorkerCluster.
    Any,
    /// `parameters` naming a WorkerCluster (that one) or a
    /// WorkerClusterSet (its clusters).
    Only(BTreeSet<String>),
    /// `parameters` naming a WorkerClusterSet placed `InOrder`: its
    /// clusters, each filled before the next.
    InOrder(Vec<String>),
}

impl Allowed {
    pub fn allows(&self, cluster: &str) -> bool {
        match self {
            Allowed::Any => true,
            Allowed::Only(clusters) => clusters.contains(cluster),
            Allowed::InOrder(clusters) => clusters.iter().any(|c| c == cluster),
        }
    }

    /// The clusters to fill first, in order, if there is an order.
    pub fn fill(&self) -> Option<&[String]> {
        match self {
            Allowed::InOrder(clusters) => Some(clusters),
            Allowed::Any | Allowed::Only(_) => None,
        }
    }

    /// What both allow: a Workload under several jobrelay checks must
    /// meet each. The first order given is kept.
    pub fn and(self, other: Allowed) -> Allowed {
        match (self, other) {
            (Allowed::Any, other) | (other, Allowed::Any) => other,
            (Allowed::InOrder(mut a), other) | (other, Allowed::InOrder(mut a)) => {
                a.retain(|c| other.allows(c));
                Allowed::InOrder(a)
            }
            (Allowed::Only(a), Allowed::Only(b)) => {
                Allowed::Only(a.intersection(&b).cloned().collect())
            }
        }
    }

    /// The clusters named, if some are.
    pub(super) fn named(&self) -> Vec<&str> {
        match self {
            Allowed::Any => Vec::new(),
            Allowed::Only(clusters) => clusters.iter().map(String::as_str).collect(),
            Allowed::InOrder(clusters) => clusters.iter().map(String::as_str).collect(),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Allowed::Any => "any WorkerCluster".into(),
            Allowed::Only(_) => format!("WorkerCluster {}", self.named().join(", ")),
            Allowed::InOrder(_) => {
                format!(
                    "WorkerCluster {} (filled in that order)",
                    self.named().join(", ")
                )
            }
        }
    }
}

/// What several jobrelay checks of one Workload allow together: the first
/// one's error, else the clusters every one allows.
pub fn all_allowed(
    each: impl IntoIterator<Item = Result<Allowed, String>>,
) -> Result<Allowed, String> {
    each.into_iter()
        .try_fold(Allowed::Any, |together, allowed| Ok(together.and(allowed?)))
}

/// Reads a check's `parameters`, looking a WorkerClusterSet up with `set`;
/// the error says what is wrong with them.
pub fn allowed(
    parameters: Option<&Parameters>,
    set: impl Fn(&str) -> Option<WorkerClusterSetSpec>,
) -> Result<Allowed, String> {
    let Some(p) = parameters else {
        return Ok(Allowed::Any);
    };
    if p.name.is_empty() {
        return Err("spec.parameters.name is empty".into());
    }
    match (p.api_group.as_str(), p.kind.as_str()) {
        ("jobrelay.dev", "WorkerCluster") => Ok(Allowed::Only(BTreeSet::from([p.name.clone()]))),
        ("jobrelay.dev", "WorkerClusterSet") => match set(&p.name) {
            Some(spec) if !spec.clusters.is_empty() => Ok(match spec.placement {
                SetPlacement::MostRoom => Allowed::Only(spec.clusters.into_iter().collect()),
                SetPlacement::InOrder => Allowed::InOrder(spec.clusters),
            }),
            Some(_) => Err(format!("WorkerClusterSet {} lists no cluster", p.name)),
            None => Err(format!(
                "WorkerClusterSet {} (spec.parameters.name) does not exist",
                p.name
            )),
        },
        (group, kind) => Err(format!(
            "spec.parameters must name a WorkerCluster or a WorkerClusterSet (apiGroup jobrelay.dev), not {group}/{kind}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_name_a_worker_cluster_a_set_of_them_or_none() {
        let spec = |clusters: &[&str], placement| WorkerClusterSetSpec {
            clusters: clusters.iter().map(|c| c.to_string()).collect(),
            placement,
        };
        let sets = |name: &str| match name {
            "gpu" => Some(spec(&["w1", "w2"], SetPlacement::MostRoom)),
            "spill" => Some(spec(&["w2", "w1"], SetPlacement::InOrder)),
            "empty" => Some(spec(&[], SetPlacement::MostRoom)),
            _ => None,
        };
        let allowed = |p: Option<&Parameters>| allowed(p, sets);
        assert_eq!(allowed(None), Ok(Allowed::Any));
        let p = |group: &str, kind: &str, name: &str| Parameters {
            api_group: group.into(),
            kind: kind.into(),
            name: name.into(),
        };
        assert_eq!(
            allowed(Some(&p("jobrelay.dev", "WorkerCluster", "w1"))),
            Ok(Allowed::Only(BTreeSet::from(["w1".to_string()])))
        );
        let wrong = allowed(Some(&p("kueue.x-k8s.io", "MultiKueueConfig", "c"))).unwrap_err();
        assert!(wrong.contains("spec.parameters") && wrong.contains("MultiKueueConfig"));
        assert!(allowed(Some(&p("jobrelay.dev", "WorkerCluster", ""))).is_err());
        assert_eq!(
            allowed(Some(&p("jobrelay.dev", "WorkerClusterSet", "gpu"))),
            Ok(Allowed::Only(BTreeSet::from([
                "w1".to_string(),
                "w2".to_string()
            ])))
        );
        let spill = allowed(Some(&p("jobrelay.dev", "WorkerClusterSet", "spill")));
        assert_eq!(spill, Ok(Allowed::InOrder(vec!["w2".into(), "w1".into()])));
        let spill = spill.expect("allowed");
        assert_eq!(
            spill.fill(),
            Some(["w2".to_string(), "w1".to_string()].as_slice())
        );
        assert!(spill.allows("w1") && !spill.allows("w3"));
        assert!(spill.describe().contains("w2, w1 (filled in that order)"));
        let missing = allowed(Some(&p("jobrelay.dev", "WorkerClusterSet", "cpu"))).unwrap_err();
        assert!(
            missing.contains("cpu") && missing.contains("does not exist"),
            "{missing}"
        );
        assert!(allowed(Some(&p("jobrelay.dev", "WorkerClusterSet", "empty"))).is_err());
    }

    #[test]
    fn several_checks_allow_what_each_allows_and_the_first_error_shows() {
        let only = |names: &[&str]| Allowed::Only(names.iter().map(|n| n.to_string()).collect());
        assert_eq!(
            all_allowed([
                Ok(Allowed::Any),
                Ok(only(&["w1", "w2"])),
                Ok(only(&["w2", "w3"]))
            ]),
            Ok(only(&["w2"]))
        );
        assert_eq!(all_allowed([Ok(Allowed::Any)]), Ok(Allowed::Any));
        let in_order =
            |names: &[&str]| Allowed::InOrder(names.iter().map(|n| n.to_string()).collect());
        assert_eq!(
            all_allowed([Ok(only(&["w1", "w3"])), Ok(in_order(&["w3", "w2", "w1"]))]),
            Ok(in_order(&["w3", "w1"])),
            "an order is kept, of the clusters both allow"
        );
        assert_eq!(
            all_allowed([Ok(in_order(&["w2", "w1"])), Ok(in_order(&["w1", "w2"]))]),
            Ok(in_order(&["w2", "w1"])),
            "the first order given wins"
        );
        assert_eq!(
            all_allowed([
                Ok(Allowed::Any),
                Err("bad".to_string()),
                Err("worse".into())
            ]),
            Err("bad".into())
        );
    }
}
