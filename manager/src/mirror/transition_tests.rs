//! Every transition of a mirror's state, as one table: the state, what
//! happens, and the state, send and answer that follow.

use std::time::{Duration, Instant};

use jobrelay_proto::v1::{MirrorPhase, RejectReason};

use super::*;
use crate::mirror::{
    Apply, Cleanup, Held, HeldPod, LostMirror, Outcome, Rejection, Reported, Send, Sent, State,
    Unschedulable,
};

use MirrorPhase::{Deleting as PhaseDeleting, Running, Succeeded, Suspended, Unspecified};

struct Case {
    what: &'static str,
    state: State,
    event: Event,
    then: State,
    send: Option<Send>,
    outcome: Outcome,
}

fn t(seconds: u64) -> Instant {
    // One origin for the whole table, so cases compare equal.
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(Instant::now) + Duration::from_secs(seconds)
}

fn held(revision: u64, phase: MirrorPhase) -> Held {
    Held {
        revision,
        phase,
        status: None,
        unschedulable: None,
        pods: None,
    }
}

fn with_status(revision: u64, phase: MirrorPhase, active: u32) -> Held {
    Held {
        status: Some(StatusText::new(&serde_json::json!({ "active": active }))),
        ..held(revision, phase)
    }
}

fn sent(session: u64, revision: u64, since: Option<u64>) -> Sent {
    Sent {
        session,
        revision,
        since: since.map(t),
    }
}

fn refusal(revision: u64, reason: RejectReason) -> Rejection {
    Rejection {
        revision,
        reason,
        message: "no".into(),
        retry_in: None,
        since: t(0),
    }
}

fn loss(mirror_uid: &str, accounted: bool) -> LostMirror {
    LostMirror {
        mirror_uid: mirror_uid.into(),
        observed: "deleted".into(),
        accounted,
    }
}

fn deleting(session: u64, held: Option<Held>, loss: Option<LostMirror>) -> State {
    deleting_with(session, held, loss, &[])
}

/// Being deleted in `session`, `pods` held Terminating.
fn holding(session: u64, held: Option<Held>, pods: &[&str]) -> State {
    deleting_with(session, held, None, pods)
}

fn deleting_with(
    session: u64,
    held: Option<Held>,
    loss: Option<LostMirror>,
    pods: &[&str],
) -> State {
    State::Deleting {
        session,
        since: t(0),
        held,
        loss,
        pods_held: pods.iter().map(|p| held_pod(p)).collect(),
    }
}

fn held_pod(pod: &str) -> HeldPod {
    HeldPod {
        pod: pod.into(),
        node: "n1".into(),
        node_down_for: Duration::from_secs(60),
    }
}

fn pods_held(pods: &[&str]) -> Event {
    Event::PodsHeld(pods.iter().map(|p| held_pod(p)).collect())
}

fn apply(revision: u64, session: Option<u64>) -> Event {
    Event::Apply {
        revision,
        session,
        now: t(3),
    }
}

fn cleanup(session: Option<u64>) -> Event {
    Event::Cleanup { session, now: t(0) }
}

fn status(revision: u64, phase: MirrorPhase) -> Event {
    Event::Status {
        revision,
        phase,
        status: None,
        unschedulable: None,
        pods: None,
        now: t(7),
    }
}

fn waiting_pods(pods: u32) -> Unschedulable {
    Unschedulable {
        pods,
        since: t(2),
        message: "0/2 nodes are available".into(),
    }
}

fn stuck(revision: u64, pods: u32) -> Held {
    Held {
        unschedulable: Some(waiting_pods(pods)),
        pods: None,
        ..held(revision, MirrorPhase::Pending)
    }
}

fn stuck_status(revision: u64, pods: u32) -> Event {
    Event::Status {
        revision,
        phase: MirrorPhase::Pending,
        status: None,
        unschedulable: Some(waiting_pods(pods)),
        pods: None,
        now: t(7),
    }
}

fn lost(mirror_uid: &str) -> Event {
    Event::Lost {
        mirror_uid: mirror_uid.into(),
        observed: "deleted".into(),
    }
}

fn gone(pods_deleted: u32) -> Event {
    Event::Gone {
        pods_deleted,
        now: t(9),
    }
}

fn reported(changed_from: Option<MirrorPhase>, answered_after: Option<u64>) -> Outcome {
    Outcome::Reported(Reported {
        changed_from,
        answered_after: answered_after.map(Duration::from_secs),
    })
}

/// One row per case: what, the state, the event, then the state, the send
/// and the answer.
#[rustfmt::skip]
fn cases() -> Vec<Case> {
    use Outcome::{Apply as A, Cleanup as C, Noted};
    use State::*;
    let permanent = refusal(1, RejectReason::Conflict);
    let transient = refusal(1, RejectReason::NamespaceMissing);
    let not_allowed = refusal(1, RejectReason::NamespaceNotAllowed);
    let sending = |revision, held| Sending { sent: sent(1, revision, Some(3)), held };
    let refused = |rejection: &Rejection, sent, held| Refused { rejection: rejection.clone(), sent, held };
    let gone_after = |loss| Gone { pods_deleted: 0, loss };
    let row = |what, state, event, then, send, outcome| Case { what, state, event, then, send, outcome };
    let send_apply = |revision| Some(Send::ApplyMirror { revision });
    let send_delete = Some(Send::DeleteMirror);
    let started = |first| C(Cleanup::Started { first });
    vec![
        // Apply.
        row("unsent: sent", Unsent, apply(1, Some(1)), sending(1, None), send_apply(1), A(Apply::Sent)),
        row("unsent, no session", Unsent, apply(1, None), Unsent, None, A(Apply::Disconnected)),
        row("sending in this session: in place", sending(1, None), apply(1, Some(1)), sending(1, None), None, A(Apply::InPlace)),
        row("sending in an old session: sent again, waiting since the first", sending(1, None), apply(1, Some(2)), Sending { sent: sent(2, 1, Some(3)), held: None }, send_apply(1), A(Apply::Sent)),
        row("held: a newer revision is sent, the old one still held", Held(held(1, Running)), apply(2, Some(1)), sending(2, Some(held(1, Running))), send_apply(2), A(Apply::Sent)),
        row("held at or past the revision: in place", Held(held(2, Running)), apply(1, Some(5)), Held(held(2, Running)), None, A(Apply::InPlace)),
        row("refused for good: rejected", refused(&permanent, Some(sent(1, 1, Some(3))), None), apply(1, Some(1)), refused(&permanent, Some(sent(1, 1, Some(3))), None), None, A(Apply::Rejected(permanent.clone()))),
        row("refused for now: waiting, even disconnected", refused(&transient, None, None), apply(1, None), refused(&transient, None, None), None, A(Apply::Waiting(transient.clone()))),
        row("refused an older revision: the new one is sent", refused(&transient, Some(sent(1, 1, Some(3))), None), apply(2, Some(1)), sending(2, None), send_apply(2), A(Apply::Sent)),
        row("deleting: awaiting gone", deleting(1, None, None), apply(1, Some(1)), deleting(1, None, None), None, A(Apply::AwaitingGone)),
        row("lost: awaiting gone", Lost(loss("m1", true)), apply(2, Some(1)), Lost(loss("m1", true)), None, A(Apply::AwaitingGone)),
        row("gone: a new mirror is sent", gone_after(None), apply(2, Some(1)), sending(2, None), send_apply(2), A(Apply::Sent)),
        row("gone, no session: a new mirror, unsent", gone_after(None), apply(2, None), Unsent, None, A(Apply::Disconnected)),
        // Cleanup.
        row("held: deletion starts, the held revision kept", Held(held(1, Running)), cleanup(Some(1)), deleting(1, Some(held(1, Running)), None), send_delete, started(true)),
        row("unsent: deletion starts", Unsent, cleanup(Some(1)), deleting(1, None, None), send_delete, started(true)),
        row("sending: deletion starts", sending(1, None), cleanup(Some(1)), deleting(1, None, None), send_delete, started(true)),
        row("lost: deletion starts, the loss kept", Lost(loss("m1", false)), cleanup(Some(1)), deleting(1, None, Some(loss("m1", false))), send_delete, started(true)),
        row("deleting in this session: waiting", deleting(1, None, None), cleanup(Some(1)), deleting(1, None, None), None, C(Cleanup::Waiting)),
        row("deleting in an old session: sent again", deleting(1, None, None), cleanup(Some(2)), deleting(2, None, None), send_delete, started(false)),
        row("no session: disconnected", Held(held(1, Running)), cleanup(None), Held(held(1, Running)), None, C(Cleanup::Disconnected)),
        row("refused its namespace, never held: gone at once, even disconnected", refused(&not_allowed, Some(sent(1, 1, Some(3))), None), cleanup(None), gone_after(None), None, C(Cleanup::Gone { pods_deleted: 0 })),
        row("refused its namespace while an older revision is held: deletion starts", refused(&not_allowed, None, Some(held(1, Running))), cleanup(Some(1)), deleting(1, Some(held(1, Running)), None), send_delete, started(true)),
        row("gone: gone, even disconnected", Gone { pods_deleted: 2, loss: None }, cleanup(None), Gone { pods_deleted: 2, loss: None }, None, C(Cleanup::Gone { pods_deleted: 2 })),
        // Status.
        row("sending: held, answered after 4s", sending(1, None), status(1, Suspended), Held(held(1, Suspended)), None, reported(Some(Unspecified), Some(4))),
        row("sending a newer revision: the older one held, still sending", sending(2, None), status(1, Running), Sending { sent: sent(1, 2, None), held: Some(held(1, Running)) }, None, reported(Some(Unspecified), Some(4))),
        row("held: the new phase, the status kept", Held(with_status(1, Running, 1)), status(1, Succeeded), Held(with_status(1, Succeeded, 1)), None, reported(Some(Running), None)),
        row("held: the same phase changes nothing shown", Held(held(1, Running)), status(1, Running), Held(held(1, Running)), None, reported(None, None)),
        row("unsent: held (the agent applied its DesiredSet)", Unsent, status(1, Running), Held(held(1, Running)), None, reported(Some(Unspecified), None)),
        row("refused: a status clears the refusal", refused(&transient, Some(sent(1, 1, Some(3))), None), status(1, Running), Held(held(1, Running)), None, reported(Some(Unspecified), Some(4))),
        row("deleting: the worker's phase kept", deleting(1, Some(held(1, Running)), None), status(1, PhaseDeleting), deleting(1, Some(held(1, PhaseDeleting)), None), None, reported(Some(Running), None)),
        row("lost: a status says nothing more", Lost(loss("m1", false)), status(1, Running), Lost(loss("m1", false)), None, reported(None, None)),
        row("gone: a status says nothing more", gone_after(None), status(1, Running), gone_after(None), None, reported(None, None)),
        row("held: its Pods wait unschedulable", Held(held(1, MirrorPhase::Pending)), stuck_status(1, 2), Held(stuck(1, 2)), None, reported(None, None)),
        row("unschedulable: the latest count replaces the last", Held(stuck(1, 2)), stuck_status(1, 1), Held(stuck(1, 1)), None, reported(None, None)),
        row("unschedulable: a status without any clears it", Held(stuck(1, 2)), status(1, Running), Held(held(1, Running)), None, reported(Some(MirrorPhase::Pending), None)),
        row("deleting: what waits is kept with the held revision", deleting(1, Some(held(1, MirrorPhase::Pending)), None), stuck_status(1, 1), deleting(1, Some(stuck(1, 1)), None), None, reported(None, None)),
        // Refused.
        row("sending: refused, what was sent kept", sending(1, None), Event::Refused(transient.clone()), refused(&transient, Some(sent(1, 1, Some(3))), None), None, Noted),
        row("held: a new revision refused, the old one held", Held(held(1, Running)), Event::Refused(permanent.clone()), refused(&permanent, None, Some(held(1, Running))), None, Noted),
        row("deleting: a refusal changes nothing", deleting(1, None, None), Event::Refused(permanent.clone()), deleting(1, None, None), None, Noted),
        row("refused again: since the first refusal in a row", refused(&transient, None, None), Event::Refused(Rejection { since: t(9), ..transient.clone() }), refused(&transient, None, None), None, Noted),
        // Lost.
        row("held: lost", Held(held(1, Running)), lost("m1"), Lost(loss("m1", false)), None, Noted),
        row("lost: the same loss again changes nothing", Lost(loss("m1", true)), lost("m1"), Lost(loss("m1", true)), None, Noted),
        row("lost: another loss replaces it", Lost(loss("m1", true)), lost("m2"), Lost(loss("m2", false)), None, Noted),
        row("deleting: lost, nothing held any more", deleting(1, Some(held(1, Running)), None), lost("m1"), deleting(1, None, Some(loss("m1", false))), None, Noted),
        row("gone: a loss changes nothing", Gone { pods_deleted: 1, loss: None }, lost("m1"), Gone { pods_deleted: 1, loss: None }, None, Noted),
        // Gone.
        row("deleting: gone after 9s, the loss kept", deleting(1, None, Some(loss("m1", true))), gone(2), Gone { pods_deleted: 2, loss: Some(loss("m1", true)) }, None, Outcome::Gone { after: Some(Duration::from_secs(9)) }),
        row("lost: gone, the loss kept", Lost(loss("m1", false)), gone(1), Gone { pods_deleted: 1, loss: Some(loss("m1", false)) }, None, Outcome::Gone { after: None }),
        row("held: gone", Held(held(1, Running)), gone(0), gone_after(None), None, Outcome::Gone { after: None }),
        // Pods held Terminating on a node not Ready.
        row("deleting: the Pods held kept", deleting(1, Some(held(1, Running)), None), pods_held(&["p1", "p2"]), holding(1, Some(held(1, Running)), &["p1", "p2"]), None, Noted),
        row("deleting: the latest report replaces the last, none clears it", holding(1, None, &["p1"]), pods_held(&[]), deleting(1, None, None), None, Noted),
        row("deleting again in a new session: the Pods held kept", holding(1, None, &["p1"]), cleanup(Some(2)), holding(2, None, &["p1"]), send_delete, started(false)),
        row("held: not being deleted, nothing kept", Held(held(1, Running)), pods_held(&["p1"]), Held(held(1, Running)), None, Noted),
        row("gone: nothing kept", gone_after(None), pods_held(&["p1"]), gone_after(None), None, Noted),
        // The loss shown.
        row("lost: shown", Lost(loss("m1", false)), Event::LossShown, Lost(loss("m1", true)), None, Noted),
        row("gone after a loss: shown", gone_after(Some(loss("m1", false))), Event::LossShown, gone_after(Some(loss("m1", true))), None, Noted),
        row("held: nothing to show", Held(held(1, Running)), Event::LossShown, Held(held(1, Running)), None, Noted),
        // Reconnected.
        row("held, not in the inventory: unsent", Held(held(1, Running)), Event::Reconnected { held: None }, Unsent, None, Noted),
        row("held, in the inventory: held as it says, status kept", Held(with_status(1, Running, 1)), Event::Reconnected { held: Some((2, Succeeded)) }, Held(with_status(2, Succeeded, 1)), None, Noted),
        row("sending, held at the revision sent: held", sending(2, None), Event::Reconnected { held: Some((2, Running)) }, Held(held(2, Running)), None, Noted),
        row("sending, an older revision held: still sending", sending(2, None), Event::Reconnected { held: Some((1, Running)) }, sending(2, Some(held(1, Running))), None, Noted),
        row("deleting: what the inventory holds", deleting(1, Some(held(1, Running)), None), Event::Reconnected { held: None }, deleting(1, None, None), None, Noted),
        row("lost: stays lost", Lost(loss("m1", false)), Event::Reconnected { held: Some((1, Running)) }, Lost(loss("m1", false)), None, Noted),
        row("unschedulable, in the inventory: what waits is kept until the next status", Held(stuck(1, 2)), Event::Reconnected { held: Some((1, MirrorPhase::Pending)) }, Held(stuck(1, 2)), None, Noted),
    ]
}

#[test]
fn every_transition_of_a_mirror() {
    for case in cases() {
        let next = transition(case.state.clone(), case.event.clone());
        assert_eq!(
            (&next.state, next.send, &next.outcome),
            (&case.then, case.send, &case.outcome),
            "{}: from {:?} on {:?}",
            case.what,
            case.state,
            case.event
        );
    }
}

#[test]
fn what_each_state_tells_the_jobs_life() {
    let unshown = State::Lost(loss("m1", false));
    assert_eq!(unshown.unshown_loss(), Some(&loss("m1", false)));
    assert!(unshown.lost_or_gone());
    assert_eq!(unshown.phase(), PhaseDeleting);
    let held_one = State::Held(with_status(1, Running, 1));
    assert!(!held_one.lost_or_gone() && held_one.is_active());
    assert_eq!(held_one.phase(), Running);
    assert!(held_one.status().is_some());
    let gone = State::Gone {
        pods_deleted: 0,
        loss: None,
    };
    assert!(gone.lost_or_gone() && !gone.is_active() && gone.held().is_none());
    let waiting = State::Sending {
        sent: sent(1, 1, Some(3)),
        held: None,
    };
    assert_eq!(waiting.awaiting_held_since(), Some(t(3)));
}
