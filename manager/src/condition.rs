//! A condition as a pure decision states it, before it is written onto an
//! object: whether it holds, the reason in one CamelCase word, and a
//! message a user can act on.

/// Whether a condition holds, why, and what a user should know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    pub holds: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Assessment {
    pub fn holds(reason: &'static str, message: String) -> Self {
        Assessment {
            holds: true,
            reason,
            message,
        }
    }

    pub fn fails(reason: &'static str, message: String) -> Self {
        Assessment {
            holds: false,
            reason,
            message,
        }
    }

    /// The condition's status as Kubernetes writes it.
    pub fn status(&self) -> &'static str {
        if self.holds { "True" } else { "False" }
    }
}
