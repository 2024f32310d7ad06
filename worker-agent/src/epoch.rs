//! Which manager replica may command this agent: the leader of the latest
//! epoch it has seen. Each Welcome names the Lease the manager's replicas
//! elect on (its UID) and the epoch the replica leads in (the Lease's
//! `leaseTransitions` when it took it). A replica that lost its Lease — paused
//! past it, cut off from its API server — still says its old epoch; once the
//! agent has been welcomed by a later one, it refuses that replica's
//! sessions, so nothing the old leader sends is acted on.

/// The latest epoch seen, per Lease (a Lease made anew starts over).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Epochs {
    lease: String,
    highest: i64,
}

impl Epochs {
    /// Takes a Welcome's `lease` and `epoch`; refuses, saying why, an epoch
    /// older than one already seen of the same Lease. A manager without
    /// leader election (no Lease) is always taken.
    pub fn welcomed(&mut self, lease: &str, epoch: i64) -> Result<(), String> {
        if lease.is_empty() {
            return Ok(());
        }
        if lease == self.lease && epoch < self.highest {
            return Err(format!(
                "this manager replica leads epoch {epoch} of Lease {lease}, but epoch {} has begun since: it is a stale leader; dialling the next",
                self.highest
            ));
        }
        if lease != self.lease {
            self.lease = lease.to_string();
            self.highest = epoch;
        }
        self.highest = self.highest.max(epoch);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_welcome_and_later_epochs_are_taken() {
        let mut epochs = Epochs::default();
        assert!(epochs.welcomed("lease-a", 3).is_ok());
        assert!(
            epochs.welcomed("lease-a", 3).is_ok(),
            "the same leader again"
        );
        assert!(epochs.welcomed("lease-a", 4).is_ok());
    }

    #[test]
    fn an_earlier_epoch_of_the_same_lease_is_refused() {
        let mut epochs = Epochs::default();
        epochs.welcomed("lease-a", 4).unwrap();
        let refused = epochs.welcomed("lease-a", 3).unwrap_err();
        assert!(
            refused.contains("epoch 3") && refused.contains("epoch 4"),
            "{refused}"
        );
        assert!(
            epochs.welcomed("lease-a", 4).is_ok(),
            "the refusal changed nothing"
        );
    }

    #[test]
    fn a_lease_made_anew_starts_over_and_no_election_is_always_taken() {
        let mut epochs = Epochs::default();
        epochs.welcomed("lease-a", 9).unwrap();
        assert!(epochs.welcomed("lease-b", 0).is_ok(), "a new Lease");
        assert!(epochs.welcomed("", 0).is_ok(), "no election");
        assert!(epochs.welcomed("lease-b", 0).is_ok());
    }
}
