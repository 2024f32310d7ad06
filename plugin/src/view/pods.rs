//! Why a relayed Job's Pods wait or failed on its worker, read back from
//! the `jobrelay.dev/pods` annotation the manager writes from its agent's
//! reports: `cluster <name> (<Pods by phase>): <reason>; <reason>`, each
//! reason `<n> Pod(s) <wait|failed> <reason> [(container …, exit code …)]
//! [: <message>]`.

use serde::Serialize;

/// The annotation, read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodsReport {
    /// The annotation as the manager wrote it.
    pub text: String,
    /// The worker the Pods are on.
    pub cluster: Option<String>,
    /// The Pods by phase, e.g. `2 Pending, 1 Failed`.
    pub phases: Option<String>,
    /// Each reason; empty when the text could not be read this way (then
    /// `text` says it all).
    pub reasons: Vec<PodReason>,
}

/// One reason some of the Pods share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReason {
    pub pods: u32,
    /// They failed; otherwise they wait.
    pub failed: bool,
    /// What they do, without the message: `wait ErrImagePull (container
    /// main)`, `failed Error (container main, exit code 3)`.
    pub headline: String,
    pub message: Option<String>,
}

impl PodReason {
    /// `2 Pods wait ErrImagePull (container main)`.
    pub fn short(&self) -> String {
        match self.pods {
            1 => format!("1 Pod {}", self.headline),
            n => format!("{n} Pods {}", self.headline),
        }
    }
}

impl PodsReport {
    /// The reasons without their messages, for a table cell; the text
    /// itself when it could not be read.
    pub fn short(&self) -> String {
        if self.reasons.is_empty() {
            return self.text.clone();
        }
        self.reasons
            .iter()
            .map(PodReason::short)
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Reads the annotation's `text`.
pub fn read(text: &str) -> PodsReport {
    let unread = PodsReport {
        text: text.into(),
        cluster: None,
        phases: None,
        reasons: Vec::new(),
    };
    let Some(rest) = text.strip_prefix("cluster ") else {
        return unread;
    };
    let Some((cluster, rest)) = rest.split_once(" (") else {
        return unread;
    };
    let Some((phases, reasons)) = rest.split_once("): ") else {
        return unread;
    };
    let Some(reasons) = split_reasons(reasons)
        .into_iter()
        .map(reason)
        .collect::<Option<Vec<_>>>()
    else {
        return unread;
    };
    PodsReport {
        text: text.into(),
        cluster: Some(cluster.into()),
        phases: Some(phases.into()),
        reasons,
    }
}

/// The reasons of `text`, cut at each `; ` that a new reason follows (a
/// message may hold `; ` too).
fn split_reasons(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (at, _) in text.match_indices("; ") {
        if at >= start && reason(&text[at + 2..]).is_some() {
            parts.push(&text[start..at]);
            start = at + 2;
        }
    }
    parts.push(&text[start..]);
    parts
}

/// One reason: `<n> Pod(s) <wait|failed> <headline rest>[: <message>]`.
fn reason(text: &str) -> Option<PodReason> {
    let (count, rest) = text.split_once(' ')?;
    let pods: u32 = count.parse().ok()?;
    let rest = rest
        .strip_prefix("Pods ")
        .or_else(|| rest.strip_prefix("Pod "))?;
    let failed = match rest.split_once(' ')?.0 {
        "wait" => false,
        "failed" => true,
        _ => return None,
    };
    let (headline, message) = match rest.split_once(": ") {
        Some((headline, message)) => (headline, Some(message.to_string())),
        None => (rest, None),
    };
    Some(PodReason {
        pods,
        failed,
        headline: headline.into(),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_REASONS: &str = "cluster worker-1 (2 Pending, 1 Failed): 2 Pods wait ErrImageNeverPull (container main): Container image \"trainer:9\" is not present; pull policy Never; 1 Pod failed Error (container main, exit code 3)";

    #[test]
    fn the_annotation_reads_into_cluster_phases_and_reasons() {
        let report = read(TWO_REASONS);
        assert_eq!(report.cluster.as_deref(), Some("worker-1"));
        assert_eq!(report.phases.as_deref(), Some("2 Pending, 1 Failed"));
        assert_eq!(
            report.reasons,
            [
                PodReason {
                    pods: 2,
                    failed: false,
                    headline: "wait ErrImageNeverPull (container main)".into(),
                    message: Some(
                        "Container image \"trainer:9\" is not present; pull policy Never".into()
                    ),
                },
                PodReason {
                    pods: 1,
                    failed: true,
                    headline: "failed Error (container main, exit code 3)".into(),
                    message: None,
                },
            ]
        );
        assert_eq!(
            report.short(),
            "2 Pods wait ErrImageNeverPull (container main); 1 Pod failed Error (container main, exit code 3)"
        );
    }

    #[test]
    fn text_in_another_shape_is_shown_as_it_is() {
        for text in [
            "something else",
            "cluster worker-1 without phases",
            "cluster worker-1 (1 Pending): three Pods wait",
        ] {
            let report = read(text);
            assert!(report.reasons.is_empty(), "{text}");
            assert_eq!(report.short(), text);
        }
    }
}
