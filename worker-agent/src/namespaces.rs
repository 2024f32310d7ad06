//! Where the worker's owner lets jobrelay run Jobs: the agent's namespace
//! policy. Namespaces by name, namespaces whose labels match a selector, or
//! every namespace; never the system namespaces or the agent's own. A
//! mirror for a namespace outside the policy is refused for good
//! (`NAMESPACE_NOT_ALLOWED`), before anything is written.

use std::collections::{BTreeMap, BTreeSet};

use kube::core::{Selector, SelectorExt};

/// Namespaces no policy opens: the cluster's own.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// The namespaces mirrors may go into.
#[derive(Debug, Clone, Default)]
pub struct NamespacePolicy {
    /// Every namespace (but the refused ones); else only `names` and those
    /// `selector` matches.
    pub all: bool,
    pub names: BTreeSet<String>,
    pub selector: Option<Selector>,
    /// The agent's own namespace (where its Secret and token live).
    pub own: Option<String>,
}

/// What the policy says of one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceVerdict {
    Allowed,
    /// Only the namespace's labels can tell (the selector): read them, ask
    /// again with them.
    NeedsLabels,
    /// Refused, with the sentence the manager Job shows.
    Refused(String),
}

impl NamespacePolicy {
    /// Every namespace but the refused ones.
    pub fn everywhere(own: Option<String>) -> Self {
        NamespacePolicy {
            all: true,
            own,
            ..NamespacePolicy::default()
        }
    }

    /// Whether a mirror may go into `namespace`, whose labels are `labels`
    /// when they were read.
    pub fn decide(
        &self,
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
    ) -> NamespaceVerdict {
        if SYSTEM_NAMESPACES.contains(&namespace) {
            return NamespaceVerdict::Refused(format!(
                "namespace {namespace} is a system namespace of the worker; jobrelay never runs Jobs there"
            ));
        }
        if self.own.as_deref() == Some(namespace) {
            return NamespaceVerdict::Refused(format!(
                "namespace {namespace} is the jobrelay agent's own on the worker; jobrelay never runs Jobs there"
            ));
        }
        if self.all || self.names.contains(namespace) {
            return NamespaceVerdict::Allowed;
        }
        match (&self.selector, labels) {
            (Some(_), None) => NamespaceVerdict::NeedsLabels,
            (Some(selector), Some(labels)) if selector.matches(labels) => NamespaceVerdict::Allowed,
            _ if self.names.is_empty() && self.selector.is_none() => {
                NamespaceVerdict::Refused(format!(
                    "namespace {namespace} is refused: the worker's owner has opened no namespace to jobrelay yet; ask them to name some in the agent's namespace policy"
                ))
            }
            // Which namespaces are open is the operator's to see (the
            // agent logs it), not every tenant's.
            _ => NamespaceVerdict::Refused(format!(
                "namespace {namespace} is not among the namespaces the worker's owner lets jobrelay use; ask them to add it to the agent's namespace policy"
            )),
        }
    }

    /// Whether no policy ever lets a mirror into `namespace` (a system
    /// namespace, the agent's own): jobrelay never wrote there, under this
    /// policy or an earlier one.
    pub fn never_allowed(&self, namespace: &str) -> bool {
        SYSTEM_NAMESPACES.contains(&namespace) || self.own.as_deref() == Some(namespace)
    }

    /// Whether the agent's watches (see [`Self::watched`]) cover `namespace`.
    pub fn watches(&self, namespace: &str) -> bool {
        self.all || self.selector.is_some() || self.names.contains(namespace)
    }

    /// The namespaces to watch one by one; `None`: watch every namespace
    /// (the policy opens all, or by labels, which only a cluster-wide watch
    /// can follow).
    pub fn watched(&self) -> Option<Vec<String>> {
        match self.all || self.selector.is_some() {
            true => None,
            false => Some(self.names.iter().cloned().collect()),
        }
    }

    /// The policy in a few words, for messages and the log.
    pub fn describe(&self) -> String {
        if self.all {
            return "every namespace but the system ones".into();
        }
        let mut parts = Vec::new();
        if !self.names.is_empty() {
            let names: Vec<&str> = self.names.iter().map(String::as_str).collect();
            parts.push(format!("namespaces {}", names.join(", ")));
        }
        if let Some(selector) = &self.selector {
            parts.push(format!("namespaces labelled {selector}"));
        }
        match parts.is_empty() {
            true => "none".into(),
            false => parts.join(" and "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn only(names: &[&str], selector: Option<&[(&str, &str)]>) -> NamespacePolicy {
        NamespacePolicy {
            all: false,
            names: names.iter().map(|n| n.to_string()).collect(),
            selector: selector.map(|pairs| {
                Selector::try_from(LabelSelector {
                    match_labels: Some(labels(pairs)),
                    match_expressions: None,
                })
                .unwrap()
            }),
            own: Some("jobrelay-system".into()),
        }
    }

    fn refused(verdict: NamespaceVerdict) -> String {
        match verdict {
            NamespaceVerdict::Refused(message) => message,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn system_namespaces_are_refused_even_when_every_namespace_is_allowed() {
        let policy = NamespacePolicy::everywhere(Some("jobrelay-system".into()));
        for namespace in SYSTEM_NAMESPACES {
            let message = refused(policy.decide(namespace, None));
            assert!(
                message.contains(namespace) && message.contains("system"),
                "{message}"
            );
        }
        let message = refused(policy.decide("jobrelay-system", None));
        assert!(message.contains("agent's own"), "{message}");
        assert_eq!(policy.decide("team-a", None), NamespaceVerdict::Allowed);
    }

    #[test]
    fn a_named_namespace_is_allowed_and_any_other_refused_with_the_policy() {
        let policy = only(&["team-a", "team-b"], None);
        assert_eq!(policy.decide("team-a", None), NamespaceVerdict::Allowed);
        let message = refused(policy.decide("team-c", None));
        assert!(
            message.contains("team-c") && !message.contains("team-a"),
            "names the namespace refused, not those allowed: {message}"
        );
        assert_eq!(
            policy.watched(),
            Some(vec!["team-a".into(), "team-b".into()])
        );
    }

    #[test]
    fn a_selector_needs_the_namespaces_labels_and_then_decides_by_them() {
        let policy = only(&["team-a"], Some(&[("jobrelay.dev/mirrors", "allowed")]));
        assert_eq!(policy.decide("team-a", None), NamespaceVerdict::Allowed);
        assert_eq!(policy.decide("team-x", None), NamespaceVerdict::NeedsLabels);
        let opened = labels(&[("jobrelay.dev/mirrors", "allowed")]);
        assert_eq!(
            policy.decide("team-x", Some(&opened)),
            NamespaceVerdict::Allowed
        );
        let message = refused(policy.decide("team-y", Some(&labels(&[]))));
        assert!(
            message.contains("team-y") && !message.contains("jobrelay.dev/mirrors"),
            "names the namespace refused, not the selector: {message}"
        );
        assert_eq!(policy.watched(), None, "labels need a cluster-wide watch");
        assert_eq!(
            refused(policy.decide("kube-system", Some(&opened))),
            refused(NamespacePolicy::default().decide("kube-system", None)),
            "labels never open a system namespace"
        );
    }

    #[test]
    fn the_watches_cover_the_named_namespaces_or_every_one() {
        let named = only(&["team-a"], None);
        assert!(named.watches("team-a"));
        assert!(
            !named.watches("team-b"),
            "a namespace the policy does not name"
        );
        let labelled = only(&["team-a"], Some(&[("jobrelay.dev/mirrors", "allowed")]));
        assert!(labelled.watches("team-b"), "a selector watches everywhere");
        assert!(NamespacePolicy::everywhere(None).watches("team-b"));
    }

    #[test]
    fn only_the_system_namespaces_and_the_agents_own_are_never_allowed() {
        let policy = only(&["team-a"], None);
        for namespace in SYSTEM_NAMESPACES {
            assert!(policy.never_allowed(namespace), "{namespace}");
        }
        assert!(policy.never_allowed("jobrelay-system"));
        assert!(
            !policy.never_allowed("team-b"),
            "refused now, but an earlier policy may have named it"
        );
    }

    #[test]
    fn an_empty_policy_allows_nothing() {
        let policy = only(&[], None);
        let message = refused(policy.decide("team-a", None));
        assert!(
            message.contains("team-a") && message.contains("opened no namespace"),
            "{message}"
        );
        assert_eq!(policy.watched(), Some(vec![]));
    }
}
