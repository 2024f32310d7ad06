//! The manager's configuration file (YAML), read and validated once at start
//! into typed values. A bad value stops the process with a message naming the
//! field and the value.

use std::path::Path;
use std::time::Duration;

use jobrelay_proto::duration;
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
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    File(#[from] jobrelay_process::config_file::FileError),
    #[error("{path}: {source}")]
    Duration {
        path: String,
        #[source]
        source: duration::FieldError,
    },
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
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    #[serde(default)]
    retention: RawRetention,
    deletions_per_second: Option<f64>,
    mirror_lost_limit: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawRetention {
    remote_after_finished: Option<String>,
    manager_after_finished: Option<String>,
    after_deactivated: Option<String>,
}

impl Config {
    /// Reads and validates a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = jobrelay_process::config_file::read(path)?;
        Config::parse(&path.display().to_string(), &text)
    }

    /// Validates configuration text; `path` names it in errors.
    pub fn parse(path: &str, text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = jobrelay_process::config_file::parse(path, text)?;
        let defaults = Config::default();
        let duration = |field: &'static str, value: &Option<String>| {
            duration::parse_field(field, value.as_deref()).map_err(|source| ConfigError::Duration {
                path: path.into(),
                source,
            })
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
        Ok(Config {
            retention,
            deletions_per_second,
            mirror_lost_limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_file_means_the_defaults() {
        assert_eq!(Config::parse("c.yaml", "").unwrap(), Config::default());
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
    }

    #[test]
    fn a_bad_value_names_the_field_and_the_value() {
        let err = Config::parse("c.yaml", "retention:\n  managerAfterFinished: -1h\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("retention.managerAfterFinished")
                && err.contains("-1h")
                && err.contains("negative"),
            "{err}"
        );
        let err = Config::parse("c.yaml", "retention:\n  remoteAfterFinished: soon\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("retention.remoteAfterFinished") && err.contains("soon"),
            "{err}"
        );
        let err = Config::parse("c.yaml", "retention:\n  afterDeactivated: 100000h\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("retention.afterDeactivated") && err.contains("longer than a year"),
            "{err}"
        );
        let err = Config::parse("c.yaml", "deletionsPerSecond: 0\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("deletionsPerSecond"), "{err}");
        let err = Config::parse("c.yaml", "mirrorLostLimit: 0\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("mirrorLostLimit") && err.contains('0'),
            "{err}"
        );
        let err = Config::parse("c.yaml", "mirrorLostLimit: -2\n")
            .unwrap_err()
            .to_string();
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
        let err = Config::parse("c.yaml", "retention:\n  remoteAfterFinishd: 5m\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("remoteAfterFinishd"), "{err}");
    }
}
