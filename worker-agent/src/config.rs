//! The agent's configuration file (YAML), read and validated once at start
//! into typed values. A bad value stops the process with a message naming the
//! field and the value.

use std::time::Duration;

use serde::Deserialize;

/// Validated configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Lifetime of Succeeded and Failed Pods; `None`: Pods are left alone.
    pub terminated_pods: Option<TerminatedPods>,
    /// Where mirrors may go; `None`: every namespace but the system ones
    /// and the agent's own.
    pub namespaces: Option<Namespaces>,
}

/// The namespace policy as the file states it (see [`crate::namespaces`]).
#[derive(Debug, Clone, Default)]
pub struct Namespaces {
    pub all: bool,
    pub names: Vec<String>,
    pub selector: Option<kube::core::Selector>,
}

/// Which terminated Pods to delete, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct TerminatedPods {
    /// Delete Succeeded Pods this long after they finished; `None`: keep them.
    pub succeeded_after: Option<Duration>,
    /// Delete Failed Pods this long after they finished; `None`: keep them.
    pub failed_after: Option<Duration>,
    /// Only these namespaces; empty: every namespace.
    pub namespaces: Vec<String>,
    /// Only Pods matching this label selector.
    pub label_selector: Option<String>,
    /// Also Pods jobrelay did not create (no origin label). Off unless the
    /// operator asks for it.
    pub include_unmirrored: bool,
    /// Log what would be deleted, delete nothing.
    pub dry_run: bool,
    /// How often Pods are looked at.
    pub interval: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    File(#[from] jobrelay_process::config_file::FileError),
    #[error("{path}: {field}: {message}")]
    Invalid {
        path: String,
        field: &'static str,
        message: String,
    },
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    terminated_pods: Option<RawTerminatedPods>,
    namespaces: Option<RawNamespaces>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawNamespaces {
    #[serde(default)]
    all: bool,
    #[serde(default)]
    names: Vec<String>,
    #[cfg_attr(test, schemars(with = "Option<serde_json::Value>"))]
    selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawTerminatedPods {
    succeeded_after: Option<String>,
    failed_after: Option<String>,
    #[serde(default)]
    namespaces: Vec<String>,
    label_selector: Option<String>,
    #[serde(default)]
    include_unmirrored: bool,
    #[serde(default)]
    dry_run: bool,
    interval: Option<String>,
}

impl Config {
    /// Validates configuration text; `path` names it in errors.
    pub fn parse(path: &str, text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = jobrelay_process::config_file::parse(path, text)?;
        let namespaces = raw
            .namespaces
            .map(|n| Self::namespaces(path, n))
            .transpose()?;
        let terminated_pods = raw
            .terminated_pods
            .map(|pods| Self::terminated_pods(path, pods))
            .transpose()?;
        Ok(Config {
            terminated_pods,
            namespaces,
        })
    }

    fn namespaces(path: &str, raw: RawNamespaces) -> Result<Namespaces, ConfigError> {
        let invalid = |field, message| ConfigError::Invalid {
            path: path.into(),
            field,
            message,
        };
        if let Some(bad) = raw.names.iter().find(|n| !is_dns_label(n)) {
            return Err(invalid(
                "namespaces.names",
                format!("{bad:?} is not a namespace name"),
            ));
        }
        let selector = raw
            .selector
            .map(kube::core::Selector::try_from)
            .transpose()
            .map_err(|e| invalid("namespaces.selector", e.to_string()))?;
        if raw.all && (selector.is_some() || !raw.names.is_empty()) {
            return Err(invalid(
                "namespaces.all",
                "all: true opens every namespace; leave names and selector out, or set all: false"
                    .into(),
            ));
        }
        Ok(Namespaces {
            all: raw.all,
            names: raw.names,
            selector,
        })
    }

    fn terminated_pods(path: &str, pods: RawTerminatedPods) -> Result<TerminatedPods, ConfigError> {
        let duration = |field: &'static str, value: &Option<String>| {
            jobrelay_process::config_file::duration(path, field, value.as_deref())
        };
        let succeeded_after = duration("terminatedPods.succeededAfter", &pods.succeeded_after)?;
        let failed_after = duration("terminatedPods.failedAfter", &pods.failed_after)?;
        if succeeded_after.is_none() && failed_after.is_none() {
            return Err(ConfigError::Invalid {
                path: path.into(),
                field: "terminatedPods",
                message: "set succeededAfter, failedAfter or both".into(),
            });
        }
        let interval =
            duration("terminatedPods.interval", &pods.interval)?.unwrap_or(Duration::from_secs(30));
        if interval.is_zero() {
            return Err(ConfigError::Invalid {
                path: path.into(),
                field: "terminatedPods.interval",
                message: format!(
                    "{:?} must be longer than zero",
                    pods.interval.unwrap_or_default()
                ),
            });
        }
        if let Some(empty) = pods.namespaces.iter().find(|n| n.trim().is_empty()) {
            return Err(ConfigError::Invalid {
                path: path.into(),
                field: "terminatedPods.namespaces",
                message: format!("{empty:?} is not a namespace name"),
            });
        }
        Ok(TerminatedPods {
            succeeded_after,
            failed_after,
            namespaces: pods.namespaces,
            label_selector: pods.label_selector.filter(|s| !s.trim().is_empty()),
            include_unmirrored: pods.include_unmirrored,
            dry_run: pods.dry_run,
            interval,
        })
    }
}

/// Whether `name` can name a namespace (an RFC 1123 label).
fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_charts_values_schema_takes_exactly_the_fields_of_the_file() {
        let ours = serde_json::to_value(schemars::schema_for!(RawConfig)).expect("a schema");
        jobrelay_process::config_file::assert_chart_takes_the_file("agent", &ours);
    }

    /// What a configuration text is refused for.
    fn refusal(text: &str) -> String {
        Config::parse("a.yaml", text).unwrap_err().to_string()
    }

    #[test]
    fn no_section_means_terminated_pods_are_left_alone() {
        assert!(Config::default().terminated_pods.is_none());
        let other = Config::parse("a.yaml", "terminatedPods:\n").unwrap();
        assert!(other.terminated_pods.is_none(), "an empty section is none");
    }

    #[test]
    fn reads_the_lifetimes_and_scope_with_safe_defaults() {
        let config = Config::parse("a.yaml", "terminatedPods:\n  succeededAfter: 1h\n  failedAfter: 24h\n  namespaces: [ml]\n  labelSelector: team=vision\n").unwrap();
        let pods = config.terminated_pods.unwrap();
        assert_eq!(pods.succeeded_after, Some(Duration::from_secs(3600)));
        assert_eq!(pods.failed_after, Some(Duration::from_secs(86400)));
        assert_eq!(pods.namespaces, ["ml"]);
        assert_eq!(pods.label_selector.as_deref(), Some("team=vision"));
        assert!(
            !pods.include_unmirrored,
            "Pods jobrelay did not create are out of scope unless asked"
        );
        assert!(!pods.dry_run);
        assert_eq!(pods.interval, Duration::from_secs(30));
    }

    #[test]
    fn reads_the_namespace_policy_and_refuses_what_cannot_name_a_namespace() {
        assert!(
            Config::default().namespaces.is_none(),
            "none: every namespace"
        );
        let config = Config::parse(
            "a.yaml",
            "namespaces:\n  names: [team-a]\n  selector:\n    matchLabels: {jobrelay.dev/mirrors: allowed}\n",
        )
        .unwrap();
        let namespaces = config.namespaces.unwrap();
        assert!(!namespaces.all);
        assert_eq!(namespaces.names, ["team-a"]);
        assert_eq!(
            namespaces.selector.map(|s| s.to_string()).as_deref(),
            Some("jobrelay.dev/mirrors=allowed")
        );
        let err = refusal("namespaces:\n  names: [Team_A]\n");
        assert!(
            err.contains("namespaces.names") && err.contains("Team_A"),
            "{err}"
        );
        let err = refusal("namespaces:\n  all: true\n  names: [team-a]\n");
        assert!(err.contains("namespaces.all"), "{err}");
        let err =
            refusal("namespaces:\n  selector:\n    matchExpressions: [{key: a, operator: Near}]\n");
        assert!(err.contains("namespaces.selector"), "{err}");
    }

    #[test]
    fn bad_values_name_the_field_and_the_value() {
        let err = refusal("terminatedPods:\n  succeededAfter: -1h\n");
        assert!(
            err.contains("terminatedPods.succeededAfter") && err.contains("-1h"),
            "{err}"
        );
        let err = refusal("terminatedPods:\n  dryRun: true\n");
        assert!(err.contains("succeededAfter, failedAfter"), "{err}");
        let err = refusal("terminatedPods:\n  failedAfter: 1m\n  interval: 0s\n");
        assert!(err.contains("terminatedPods.interval"), "{err}");
        let err = refusal("terminatedPods:\n  failedAfter: 1m\n  includeUnmirored: true\n");
        assert!(err.contains("includeUnmirored"), "{err}");
    }
}
