//! Which refusals of a worker can clear by themselves: the one rule both
//! sides of the wire apply to an `ApplyRejected`.

use crate::v1::RejectReason;

impl RejectReason {
    /// A permanent refusal ends the manager Job `Failed` (reason
    /// `RemoteRejected`); any other is retried with backoff until it clears.
    pub fn is_permanent(self) -> bool {
        matches!(
            self,
            RejectReason::Conflict
                | RejectReason::Invalid
                | RejectReason::NamespaceNotAllowed
                | RejectReason::PolicyDenied
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_job_a_foreign_one_or_one_the_workers_policy_refuses_is_permanent() {
        let permanent: Vec<RejectReason> = (0..=12)
            .filter_map(|n| RejectReason::try_from(n).ok())
            .filter(|r| r.is_permanent())
            .collect();
        assert_eq!(
            permanent,
            [
                RejectReason::Conflict,
                RejectReason::Invalid,
                RejectReason::NamespaceNotAllowed,
                RejectReason::PolicyDenied
            ]
        );
        assert!(!RejectReason::NamespaceMissing.is_permanent());
        assert!(!RejectReason::QuotaExceeded.is_permanent());
    }
}
