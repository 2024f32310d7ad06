//! Which manager installation may command the mirrors on this worker. Each
//! Welcome names the manager's instance (the UID of its cluster's
//! `kube-system` namespace), and every mirror Job the agent creates carries
//! it in the [`MANAGER_INSTANCE_LABEL`](crate::wire::MANAGER_INSTANCE_LABEL). A manager of the same
//! origin but another instance — a restored backup, a staging copy given the
//! same origin and CA — would otherwise send a DesiredSet that empties the
//! worker; while the worker holds mirrors another instance made, the agent
//! refuses it, until an operator adopts the new instance
//! (`--adopt-manager-instance`).

/// Whether the manager offering `offered` may command a worker whose mirror
/// Jobs of its origin name the instances `held` (a mirror made before
/// instances were recorded names none and speaks for no one), given the
/// instance an operator adopted, if any. Refuses, saying why and what to do,
/// when a mirror belongs to another instance, and a manager that names no
/// instance: it could not be told apart from another installation. Both
/// sides judge: the manager refuses before it welcomes (and shows why on its
/// WorkerCluster), and the agent refuses the Welcome whatever the manager
/// decided.
pub fn judge(offered: &str, held: &[String], adopted: &str) -> Result<(), String> {
    if offered.is_empty() {
        return Err(
            "refusing a manager that names no instance (its Welcome's manager_instance is empty): \
             the agent takes commands only from a manager installation it can tell apart from \
             another; run a manager of this agent's version or newer"
                .to_string(),
        );
    }
    if adopted == offered {
        return Ok(());
    }
    let mut others: Vec<&str> = held
        .iter()
        .map(String::as_str)
        .filter(|instance| !instance.is_empty() && *instance != offered)
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    others.sort_unstable();
    others.dedup();
    Err(format!(
        "refusing manager instance {offered}: the worker holds mirrors that manager instance {} of the same origin made; \
         if {offered} replaces it, set the agent's --adopt-manager-instance={offered} (chart value agent.adoptManagerInstance)",
        others.join(" and ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(instances: &[&str]) -> Vec<String> {
        instances.iter().map(|i| i.to_string()).collect()
    }

    #[test]
    fn a_worker_without_mirrors_of_another_instance_takes_the_manager() {
        assert!(judge("a", &[], "").is_ok(), "nothing held");
        assert!(judge("a", &held(&["a"]), "").is_ok(), "its own");
        assert!(
            judge("a", &held(&[""]), "").is_ok(),
            "mirrors from before instances were recorded speak for no one"
        );
    }

    #[test]
    fn mirrors_of_another_instance_refuse_the_manager_naming_both_and_the_way_out() {
        let refused = judge("b", &held(&["c", "a", "b", "a"]), "").unwrap_err();
        assert!(refused.contains("refusing manager instance b"), "{refused}");
        assert!(refused.contains("instance a and c of"), "{refused}");
        assert!(
            refused.contains("--adopt-manager-instance=b"),
            "says how to adopt it: {refused}"
        );
    }

    #[test]
    fn an_adopted_instance_is_taken_and_only_that_one() {
        assert!(judge("b", &held(&["a"]), "b").is_ok());
        assert!(
            judge("c", &held(&["a"]), "b").is_err(),
            "adopting b says nothing about c"
        );
    }

    #[test]
    fn a_manager_naming_no_instance_is_refused_whatever_the_worker_holds() {
        for held in [held(&["a"]), held(&[])] {
            let refused = judge("", &held, "").unwrap_err();
            assert!(refused.contains("names no instance"), "{refused}");
        }
        assert!(judge("", &[], "").is_err(), "not even as an adopted one");
    }
}
