//! A copied status as the manager keeps it between a report and its write.

use serde_json::Value;

/// A copied status as the manager keeps it between a report and its write:
/// its JSON text. The manager holds one per mirror, and the text takes a
/// tenth of the memory of the parsed tree (a few hundred bytes for a
/// finished Job's, where the tree's maps take several kilobytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusText(Box<str>);

impl StatusText {
    pub fn new(copied: &Value) -> Self {
        StatusText(copied.to_string().into_boxed_str())
    }

    /// The copied status again.
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).expect("the text of a JSON value reads back")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_status_reads_back_as_written() {
        let status = serde_json::json!({"active": 1, "conditions": [{"type": "Complete", "status": "True"}]});
        let kept = StatusText::new(&status);
        assert_eq!(kept.value(), status);
    }
}
