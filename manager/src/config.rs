//! The manager's configuration file (YAML), read and validated once at start
//! into typed values. A bad value stops the process with a message naming the
//! field and the value.

use std::time::Duration;

use serde::Deserialize;

/// Validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub retention: Retention,
    /// Manager Jobs deleted per second by retention, at most (a backlog at
    /// start is worked off at this pace, not in one burst).
    pub deletions_per_second: f64,
    /// Losses of a Job's mirror behind jobrelay's back after which the Job
    /// ends `Failed` (reason `RemoteJobLost`) instead of running again.
    pub mirror_lost_limit: u32,
    pub kueue: Kueue,
}

/// How jobrelay answers Kueue's admission check.
#[derive(Debug, Clone, PartialEq)]
pub struct Kueue {
    /// How long placement avoids a cluster after Kueue evicted a Job there
    /// because its Pods did not become ready (`waitForPodsReady`); zero:
    /// the cluster is only tried last.
    pub avoid_after_pods_not_ready: Duration,
}

/// How long finished and deactivated Jobs are kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Retention {
    /// Keep the worker Job and its Pods this long after the Job finished.
    pub remote_after_finished: Duration,
    /// Delete the manager Job this long after it finished; `None`: never.
    pub manager_after_finished: Option<Duration>,
    /// Delete a manager Job this long after jobrelay deactivated it; `None`: never.
    pub after_deactivated: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            retention: Retention {
                remote_after_finished: Duration::ZERO,
                manager_after_finished: None,
                after_deactivated: None,
            },
            deletions_per_second: 20.0,
            mirror_lost_limit: 3,
            kueue: Kueue {
                avoid_after_pods_not_ready: Duration::from_secs(600),
            },
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    File(#[from] jobrelay_process::config_file::FileError),
    #[error("{path}: mirrorLostLimit: {value} must be at least 1")]
    LostLimit { path: String, value: u32 },
    #[error("{path}: {field}: {value} is not a positive number")]
    NotPositive {
        path: String,
        field: &'static str,
        value: f64,
    },
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    #[serde(default)]
    retention: RawRetention,
    deletions_per_second: Option<f64>,
    mirror_lost_limit: Option<u32>,
    #[serde(default)]
    kueue: RawKueue,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawKueue {
    avoid_after_pods_not_ready: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawRetention {
    remote_after_finished: Option<String>,
    manager_after_finished: Option<String>,
    after_deactivated: Option<String>,
}

impl Config {
    /// Validates configuration text; `path` names it in errors.
    pub fn parse(path: &str, text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = jobrelay_process::config_file::parse(path, text)?;
        let defaults = Config::default();
        let duration = |field: &'static str, value: &Option<String>| {
            jobrelay_process::config_file::duration(path, field, value.as_deref())
        };
        let retention = Retention {
            remote_after_finished: duration(
                "retention.remoteAfterFinished",
                &raw.retention.remote_after_finished,
            )?
            .unwrap_or(defaults.retention.remote_after_finished),
            manager_after_finished: duration(
                "retention.managerAfterFinished",
                &raw.retention.manager_after_finished,
            )?,
            after_deactivated: duration(
                "retention.afterDeactivated",
                &raw.retention.after_deactivated,
            )?,
        };
        let deletions_per_second = raw
            .deletions_per_second
            .unwrap_or(defaults.deletions_per_second);
        if !(deletions_per_second.is_finite() && deletions_per_second > 0.0) {
            return Err(ConfigError::NotPositive {
                path: path.into(),
                field: "deletionsPerSecond",
                value: deletions_per_second,
            });
        }
        let mirror_lost_limit = raw.mirror_lost_limit.unwrap_or(defaults.mirror_lost_limit);
        if mirror_lost_limit == 0 {
            return Err(ConfigError::LostLimit {
                path: path.into(),
                value: mirror_lost_limit,
            });
        }
        let kueue = Kueue {
            avoid_after_pods_not_ready: duration(
                "kueue.avoidAfterPodsNotReady",
                &raw.kueue.avoid_after_pods_not_ready,
            )?
            .unwrap_or(defaults.kueue.avoid_after_pods_not_ready),
        };
        Ok(Config {
            retention,
            deletions_per_second,
            mirror_lost_limit,
            kueue,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_charts_values_schema_takes_exactly_the_fields_of_the_file() {
        let ours = serde_json::to_value(schemars::schema_for!(RawConfig)).expect("a schema");
        jobrelay_process::config_file::assert_chart_takes_the_file("manager", &ours);
    }

    #[test]
    fn the_defaults_keep_everything_but_the_remote_mirror() {
        // A blank file is the defaults (config_file::parse).
        let defaults = Config::default();
        assert_eq!(defaults.retention.remote_after_finished, Duration::ZERO);
        assert_eq!(defaults.retention.manager_after_finished, None);
    }

    #[test]
    fn reads_durations_as_kubernetes_users_write_them() {
        let config = Config::parse(
            "c.yaml",
            "retention:\n  remoteAfterFinished: 15m\n  managerAfterFinished: 1h30m\n  afterDeactivated: 90s\ndeletionsPerSecond: 5\n",
        )
        .unwrap();
        assert_eq!(
            config.retention.remote_after_finished,
            Duration::from_secs(900)
        );
        assert_eq!(
            config.retention.manager_after_finished,
            Some(Duration::from_secs(5400))
        );
        assert_eq!(
            config.retention.after_deactivated,
            Some(Duration::from_secs(90))
        );
        assert_eq!(config.deletions_per_second, 5.0);
        assert_eq!(
            config.kueue.avoid_after_pods_not_ready,
            Duration::from_secs(600),
            "the default"
        );
        let config = Config::parse("c.yaml", "kueue:\n  avoidAfterPodsNotReady: 0s\n").unwrap();
        assert_eq!(config.kueue.avoid_after_pods_not_ready, Duration::ZERO);
    }

    #[test]
    fn a_bad_value_names_the_field_and_the_value() {
        let err = refusal("retention:\n  managerAfterFinished: -1h\n");
        assert!(
            err.contains("retention.managerAfterFinished")
                && err.contains("-1h")
                && err.contains("negative"),
            "{err}"
        );
        let err = refusal("retention:\n  remoteAfterFinished: soon\n");
        assert!(
            err.contains("retention.remoteAfterFinished") && err.contains("soon"),
            "{err}"
        );
        let err = refusal("retention:\n  afterDeactivated: 100000h\n");
        assert!(
            err.contains("retention.afterDeactivated") && err.contains("longer than a year"),
            "{err}"
        );
        let err = refusal("deletionsPerSecond: 0\n");
        assert!(err.contains("deletionsPerSecond"), "{err}");
        let err = refusal("mirrorLostLimit: 0\n");
        assert!(
            err.contains("mirrorLostLimit") && err.contains('0'),
            "{err}"
        );
        let err = refusal("mirrorLostLimit: -2\n");
        assert!(
            err.contains("mirrorLostLimit") || err.contains("-2"),
            "{err}"
        );
        assert_eq!(
            Config::parse("c.yaml", "mirrorLostLimit: 5\n")
                .unwrap()
                .mirror_lost_limit,
            5
        );
    }

    #[test]
    fn an_unknown_field_is_refused_by_name() {
        let err = refusal("retention:\n  remoteAfterFinishd: 5m\n");
        assert!(err.contains("remoteAfterFinishd"), "{err}");
    }

    /// What a configuration text is refused for.
    fn refusal(text: &str) -> String {
        Config::parse("c.yaml", text).unwrap_err().to_string()
    }
}
