//! What an agent last said of a mirror's Pods: how many are in each phase,
//! and the few reasons most of them share for waiting or having failed.

use jobrelay_proto::v1::{PodReasonKind, PodSummary};

/// A mirror's Pods as its latest status counts them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodsSeen {
    pub pending: u32,
    pub running: u32,
    pub succeeded: u32,
    pub failed: u32,
    /// Most Pods first.
    pub reasons: Vec<PodWhy>,
}

/// One reason some of a mirror's Pods share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodWhy {
    /// The Pods ended with it (else they wait with it).
    pub failed: bool,
    /// The kubelet's, the scheduler's or the Pod's own reason.
    pub reason: String,
    /// One Pod's message.
    pub message: String,
    /// The container it concerns; empty for the Pod as a whole.
    pub container: String,
    pub exit_code: Option<i32>,
    pub pods: u32,
}

impl From<PodSummary> for PodsSeen {
    fn from(summary: PodSummary) -> Self {
        let reasons = summary
            .reasons
            .into_iter()
            .map(|r| PodWhy {
                failed: r.kind() == PodReasonKind::Failed,
                reason: r.reason,
                message: r.message,
                container: r.container,
                exit_code: r.exit_code,
                pods: r.pods,
            })
            .collect();
        PodsSeen {
            pending: summary.pending,
            running: summary.running,
            succeeded: summary.succeeded,
            failed: summary.failed,
            reasons,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jobrelay_proto::v1::PodReason;

    #[test]
    fn a_summary_keeps_its_counts_and_says_which_reasons_are_failures() {
        let summary = PodSummary {
            pending: 1,
            running: 2,
            succeeded: 3,
            failed: 4,
            reasons: vec![
                PodReason {
                    kind: PodReasonKind::Failed as i32,
                    reason: "OOMKilled".into(),
                    container: "main".into(),
                    exit_code: Some(137),
                    pods: 4,
                    ..PodReason::default()
                },
                PodReason {
                    kind: PodReasonKind::Waiting as i32,
                    reason: "ImagePullBackOff".into(),
                    message: "Back-off pulling image".into(),
                    pods: 1,
                    ..PodReason::default()
                },
            ],
        };
        let seen = PodsSeen::from(summary);
        assert_eq!(
            (seen.pending, seen.running, seen.succeeded, seen.failed),
            (1, 2, 3, 4)
        );
        assert_eq!(
            seen.reasons
                .iter()
                .map(|r| (r.failed, r.reason.as_str()))
                .collect::<Vec<_>>(),
            [(true, "OOMKilled"), (false, "ImagePullBackOff")]
        );
        assert_eq!(seen.reasons[0].exit_code, Some(137));
    }
}
