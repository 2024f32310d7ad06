//! The version skew the session allows between a manager and its agents:
//! the same major version, and an agent of the manager's minor version or
//! one older, never newer. So an upgrade goes manager first, then agents,
//! one minor version at a time; the manager refuses any other agent in
//! answer to its Hello, saying which versions it takes.

/// Why an agent's version is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkewError {
    #[error("agent version {agent:?} is not a version (MAJOR.MINOR.PATCH)")]
    Unreadable { agent: String },
    #[error(
        "agent version {agent} is not supported by manager {manager}: agents must be of the manager's minor version or one older ({supported}), never newer; upgrade the manager first, then the agents"
    )]
    Unsupported {
        agent: String,
        manager: String,
        supported: String,
    },
}

/// MAJOR and MINOR of a `MAJOR.MINOR.PATCH[-pre][+build]` version.
fn major_minor(version: &str) -> Option<(u64, u64)> {
    let mut parts = version.trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = parts.next()?;
    let digits = patch.split(['-', '+']).next()?;
    digits.parse::<u64>().ok()?;
    Some((major, minor))
}

/// Whether a manager of version `manager` takes an agent of version `agent`.
pub fn check(manager: &str, agent: &str) -> Result<(), SkewError> {
    let Some((agent_major, agent_minor)) = major_minor(agent) else {
        return Err(SkewError::Unreadable {
            agent: agent.to_string(),
        });
    };
    // A manager's own version always reads; if it did not, refuse nothing.
    let Some((major, minor)) = major_minor(manager) else {
        return Ok(());
    };
    if agent_major == major && (agent_minor == minor || agent_minor + 1 == minor) {
        return Ok(());
    }
    let supported = match minor {
        0 => format!("{major}.0.x"),
        _ => format!("{major}.{}.x or {major}.{minor}.x", minor - 1),
    };
    Err(SkewError::Unsupported {
        agent: agent.to_string(),
        manager: manager.to_string(),
        supported,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_minor_version_is_taken_whatever_the_patch() {
        assert_eq!(check("0.4.2", "0.4.0"), Ok(()));
        assert_eq!(check("0.4.0", "0.4.7"), Ok(()));
        assert_eq!(check("1.2.3", "1.2.3-rc.1"), Ok(()));
    }

    #[test]
    fn an_agent_one_minor_version_older_is_taken() {
        assert_eq!(check("0.4.0", "0.3.9"), Ok(()));
    }

    #[test]
    fn an_agent_two_minor_versions_older_is_refused_saying_what_is_taken() {
        let error = check("0.5.0", "0.3.1").unwrap_err().to_string();
        assert!(error.contains("0.4.x or 0.5.x"), "{error}");
        assert!(error.contains("upgrade the manager first"), "{error}");
    }

    #[test]
    fn a_newer_agent_is_refused() {
        assert!(matches!(
            check("0.4.0", "0.5.0"),
            Err(SkewError::Unsupported { .. })
        ));
    }

    #[test]
    fn another_major_version_is_refused() {
        assert!(matches!(
            check("2.0.0", "1.9.0"),
            Err(SkewError::Unsupported { .. })
        ));
        let error = check("2.0.0", "1.9.0").unwrap_err().to_string();
        assert!(error.contains("(2.0.x)"), "{error}");
    }

    #[test]
    fn an_unreadable_agent_version_is_refused() {
        assert!(matches!(
            check("0.4.0", "latest"),
            Err(SkewError::Unreadable { .. })
        ));
        assert!(matches!(
            check("0.4.0", ""),
            Err(SkewError::Unreadable { .. })
        ));
    }
}
