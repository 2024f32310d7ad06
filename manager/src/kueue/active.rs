//! An AdmissionCheck's `Active` condition, as a pure decision: the check is
//! active only while some cluster could take some Job of the queues that
//! list it — its parameters valid, the check applied to every flavor, an
//! allowed cluster connected whose `spec.namespaceSelector` admits a
//! namespace those queues' Jobs come from. Kueue admits no Workload through
//! an inactive check, so it preempts nothing for a Job that cannot run.

use std::collections::BTreeSet;

use super::parameters::Allowed;
use crate::condition::Assessment;

/// What the check's clusters and queues are, as the caches show them.
#[derive(Debug, Default)]
pub struct Reach {
    /// The WorkerClusters registered.
    pub registered: BTreeSet<String>,
    /// The WorkerClusters whose agents are connected.
    pub connected: BTreeSet<String>,
    /// The namespaces (their labels cached) of the LocalQueues feeding a
    /// ClusterQueue that lists the check; none known: no namespace rules a
    /// cluster out.
    pub namespaces: BTreeSet<String>,
    /// The ClusterQueues that list the check for some flavors only
    /// (`spec.admissionChecksStrategy.admissionChecks[].onFlavors`).
    pub per_flavor: BTreeSet<String>,
}

/// The check's `Active` condition; `admits(cluster, namespace)` says
/// whether a cluster's `spec.namespaceSelector` admits a namespace.
pub fn active(
    allowed: &Result<Allowed, String>,
    reach: &Reach,
    admits: impl Fn(&str, &str) -> bool,
) -> Assessment {
    let allowed = match allowed {
        Err(why) => return Assessment::fails("InvalidParameters", why.clone()),
        Ok(allowed) => allowed,
    };
    if !reach.per_flavor.is_empty() {
        return Assessment::fails(
            "AppliedPerFlavor",
            format!(
                "ClusterQueue {} lists this check for some flavors only (onFlavors): a Job given to jobrelay (spec.managedBy) runs only on worker clusters, whatever flavor Kueue assigns, so the check must apply to every flavor; remove onFlavors from its spec.admissionChecksStrategy",
                join(&reach.per_flavor)
            ),
        );
    }
    if let Some(missing) = allowed
        .named()
        .into_iter()
        .find(|c| !reach.registered.contains(*c))
    {
        return Assessment::fails(
            "UnknownCluster",
            format!("no WorkerCluster named {missing} is registered"),
        );
    }
    let usable: Vec<&str> = reach
        .connected
        .iter()
        .filter(|c| allowed.allows(c))
        .map(String::as_str)
        .collect();
    if usable.is_empty() {
        return Assessment::fails(
            "NoClusterConnected",
            format!("no agent of {} is connected", allowed.describe()),
        );
    }
    let admitting: Vec<&str> = usable
        .iter()
        .copied()
        .filter(|c| reach.namespaces.is_empty() || reach.namespaces.iter().any(|n| admits(c, n)))
        .collect();
    if admitting.is_empty() {
        return Assessment::fails(
            "NoClusterAdmits",
            format!(
                "no connected cluster of {} admits a namespace of the LocalQueues that feed this check ({}): the spec.namespaceSelector of {} admits none of them",
                allowed.describe(),
                join(&reach.namespaces),
                usable.join(", ")
            ),
        );
    }
    Assessment::holds(
        "Active",
        format!("jobrelay can place Workloads on {}", admitting.join(", ")),
    )
}

fn join(names: &BTreeSet<String>) -> String {
    names
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// w1 and w2 registered, w2 connected, no queue known.
    fn reach() -> Reach {
        Reach {
            registered: set(&["w1", "w2"]),
            connected: set(&["w2"]),
            ..Reach::default()
        }
    }

    fn all(_: &str, _: &str) -> bool {
        true
    }

    #[test]
    fn a_check_is_active_while_an_allowed_cluster_is_connected() {
        let any = active(&Ok(Allowed::Any), &reach(), all);
        assert_eq!((any.holds, any.reason), (true, "Active"));
        assert!(any.message.contains("w2"), "{}", any.message);
    }

    #[test]
    fn no_allowed_cluster_connected_makes_it_inactive_naming_them() {
        let off = active(&Ok(Allowed::Only(set(&["w1"]))), &reach(), all);
        assert_eq!((off.holds, off.reason), (false, "NoClusterConnected"));
        assert!(off.message.contains("w1"), "{}", off.message);
    }

    #[test]
    fn parameters_naming_an_unregistered_cluster_make_it_inactive() {
        let unknown = active(&Ok(Allowed::Only(set(&["w9"]))), &reach(), all);
        assert_eq!((unknown.holds, unknown.reason), (false, "UnknownCluster"));
        assert!(unknown.message.contains("w9"), "{}", unknown.message);
    }

    #[test]
    fn invalid_parameters_make_it_inactive_saying_what_is_wrong() {
        let invalid = active(&Err("bad".into()), &reach(), all);
        assert_eq!(
            (invalid.holds, invalid.reason, invalid.message.as_str()),
            (false, "InvalidParameters", "bad")
        );
    }

    #[test]
    fn a_cluster_queue_listing_it_on_some_flavors_only_makes_it_inactive_naming_the_queue() {
        let reach = Reach {
            per_flavor: set(&["gpu-queue"]),
            ..reach()
        };
        let off = active(&Ok(Allowed::Any), &reach, all);
        assert_eq!((off.holds, off.reason), (false, "AppliedPerFlavor"));
        assert!(
            off.message.contains("ClusterQueue gpu-queue") && off.message.contains("onFlavors"),
            "{}",
            off.message
        );
    }

    /// w1 and w2 connected, the check's LocalQueues in team-a and team-b.
    fn reach_with_queues() -> Reach {
        Reach {
            namespaces: set(&["team-a", "team-b"]),
            connected: set(&["w1", "w2"]),
            ..reach()
        }
    }

    #[test]
    fn connected_clusters_that_admit_none_of_its_queues_namespaces_make_it_inactive() {
        let off = active(&Ok(Allowed::Any), &reach_with_queues(), |_, n| {
            n == "team-c"
        });
        assert_eq!((off.holds, off.reason), (false, "NoClusterAdmits"));
        assert!(
            off.message.contains("team-a, team-b") && off.message.contains("w1, w2"),
            "{}",
            off.message
        );
    }

    #[test]
    fn it_is_active_on_the_clusters_that_admit_one_of_its_queues_namespaces() {
        let on = active(&Ok(Allowed::Any), &reach_with_queues(), |c, n| {
            c == "w2" && n == "team-b"
        });
        assert_eq!((on.holds, on.reason), (true, "Active"));
        assert!(
            on.message.ends_with("on w2"),
            "only w2 can take a Job: {}",
            on.message
        );
    }
}
