//! The check states jobrelay wrote that its Workload cache may not show yet.
//! A Workload looked at again before the watch brings back jobrelay's own
//! write (its Job or mirror changed in between) would otherwise have the same
//! answer written twice: the second write is refused as a conflict, or lands
//! between Kueue's own writes, and either way makes Kueue's Workload
//! controller look at the Workload once more for nothing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::check::CheckState;

/// How long a view of the Workload that does not show an answer jobrelay
/// wrote is taken for one the watch has not caught up with; after that it
/// is believed, and the answer written again.
pub const ECHO_WITHIN: Duration = Duration::from_secs(10);

/// One answer on one Workload: the state, its message, and the reservation
/// it answers (the `QuotaReserved` condition's transition time: a new
/// reservation is a new question).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub state: CheckState,
    pub message: String,
    pub reservation: String,
}

/// Whether `answer` still has to be written, given the one written last
/// and when.
pub fn to_write(last: Option<&(Answer, Instant)>, answer: &Answer, now: Instant) -> bool {
    match last {
        Some((written, at)) => {
            written != answer || now.saturating_duration_since(*at) >= ECHO_WITHIN
        }
        None => true,
    }
}

/// The answer written last on each Workload, by Workload UID, until its
/// check is seen to leave `Pending` or [`ECHO_WITHIN`] passed.
#[derive(Debug, Default)]
pub struct Answers(Mutex<HashMap<String, (Answer, Instant)>>);

impl Answers {
    /// Whether `answer` on the Workload `uid` has to be written now.
    pub fn to_write(&self, uid: &str, answer: &Answer) -> bool {
        let written = self.0.lock().unwrap_or_else(|p| p.into_inner());
        to_write(written.get(uid), answer, Instant::now())
    }

    /// Records that `answer` on the Workload `uid` was written, and drops
    /// what no longer holds back a write (a Workload deleted unseen leaves
    /// nothing behind).
    pub fn written(&self, uid: &str, answer: Answer) {
        let now = Instant::now();
        let mut written = self.0.lock().unwrap_or_else(|p| p.into_inner());
        written.retain(|_, (_, at)| now.saturating_duration_since(*at) < ECHO_WITHIN);
        written.insert(uid.to_string(), (answer, now));
    }

    /// Forgets the Workload `uid`: its cache shows the check answered, or
    /// the Workload gone.
    pub fn forget(&self, uid: &str) {
        let mut written = self.0.lock().unwrap_or_else(|p| p.into_inner());
        written.remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(reservation: &str) -> Answer {
        Answer {
            state: CheckState::Ready,
            message: "the mirror is held on cluster worker-1".into(),
            reservation: reservation.into(),
        }
    }

    #[test]
    fn a_first_answer_is_written() {
        assert!(to_write(None, &ready("10:00:00"), Instant::now()));
    }

    #[test]
    fn the_same_answer_to_the_same_reservation_is_not_written_again_while_its_echo_is_due() {
        let at = Instant::now();
        let last = (ready("10:00:00"), at);
        assert!(!to_write(
            Some(&last),
            &ready("10:00:00"),
            at + Duration::from_millis(80)
        ));
    }

    #[test]
    fn an_answer_the_cache_still_lacks_after_the_echo_was_due_is_written_again() {
        let at = Instant::now();
        let last = (ready("10:00:00"), at);
        assert!(to_write(Some(&last), &ready("10:00:00"), at + ECHO_WITHIN));
    }

    #[test]
    fn a_new_reservation_or_another_answer_is_written() {
        let at = Instant::now();
        let last = (ready("10:00:00"), at);
        assert!(to_write(Some(&last), &ready("10:05:00"), at));
        let retry = Answer {
            state: CheckState::Retry,
            ..ready("10:00:00")
        };
        assert!(to_write(Some(&last), &retry, at));
        let other = Answer {
            message: "the mirror was admitted by cluster worker-1's Kueue".into(),
            ..ready("10:00:00")
        };
        assert!(to_write(Some(&last), &other, at));
    }
}
