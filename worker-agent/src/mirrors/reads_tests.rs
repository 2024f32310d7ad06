use super::*;

/// A policy that names `team-a` only, the agent living in `jobrelay-system`.
fn named() -> NamespacePolicy {
    NamespacePolicy {
        all: false,
        names: ["team-a".to_string()].into(),
        selector: None,
        own: Some("jobrelay-system".into()),
    }
}

#[test]
fn the_caches_show_only_the_namespaces_the_watches_cover() {
    let everywhere = NamespacePolicy::everywhere(Some("jobrelay-system".into()));
    let rows = [
        // (policy, namespace, scope)
        (named(), "team-a", Scope::Watched),
        (named(), "team-b", Scope::Unwatched),
        (named(), "", Scope::Watched),
        (named(), "kube-system", Scope::NeverWritten),
        (named(), "jobrelay-system", Scope::NeverWritten),
        (everywhere.clone(), "team-b", Scope::Watched),
        (everywhere, "kube-system", Scope::NeverWritten),
    ];
    for (policy, namespace, scope) in rows {
        assert_eq!(
            scope_of(&policy, namespace),
            scope,
            "{namespace} under {}",
            policy.describe()
        );
    }
}

/// What a row of the confirmation table expects.
#[derive(Debug)]
enum Expect {
    Gone,
    Standing,
    /// Not known, for a reason that names the namespace and says this.
    Unknown(&'static str),
}

#[test]
fn only_a_read_that_succeeded_confirms_a_mirror_gone() {
    let forbidden = Read::Failed(ReadFailure::Forbidden("jobs is forbidden".into()));
    let failed = Read::Failed(ReadFailure::Other("connection refused".into()));
    let outside = "outside the agent's namespace policy";
    let rows = [
        // (scope, read, expected)
        (Scope::Watched, Some(&Read::Nothing), Expect::Gone),
        (Scope::Unwatched, Some(&Read::Nothing), Expect::Gone),
        (Scope::Watched, Some(&Read::Standing), Expect::Standing),
        (Scope::Unwatched, Some(&Read::Standing), Expect::Standing),
        (
            Scope::Watched,
            Some(&forbidden),
            Expect::Unknown("jobs is forbidden"),
        ),
        (Scope::Unwatched, Some(&forbidden), Expect::Unknown(outside)),
        (
            Scope::Watched,
            Some(&failed),
            Expect::Unknown("connection refused"),
        ),
        (Scope::Unwatched, Some(&failed), Expect::Unknown(outside)),
        (Scope::Unwatched, None, Expect::Unknown("not read")),
        (Scope::NeverWritten, None, Expect::Gone),
        (Scope::NeverWritten, Some(&forbidden), Expect::Gone),
    ];
    for (scope, read, expected) in rows {
        let confirmation = confirmation("team-b", scope, read);
        let matched = match (&expected, &confirmation) {
            (Expect::Gone, Confirmation::Gone) | (Expect::Standing, Confirmation::Standing) => true,
            (Expect::Unknown(says), Confirmation::Unknown(why)) => {
                why.contains("team-b") && why.contains(says)
            }
            _ => false,
        };
        assert!(
            matched,
            "{scope:?}, {read:?}: expected {expected:?}, got {confirmation:?}"
        );
    }
}

#[test]
fn a_refused_list_is_forbidden_and_any_other_failure_a_failure() {
    let status = |code: u16| {
        let status = kube::core::Status {
            code,
            message: format!("code {code}"),
            ..Default::default()
        };
        kube::Error::Api(status.boxed())
    };
    assert_eq!(
        read_failure(&status(403)),
        ReadFailure::Forbidden("code 403".into())
    );
    assert!(matches!(read_failure(&status(500)), ReadFailure::Other(m) if m.contains("code 500")));
    assert!(matches!(read_failure(&status(401)), ReadFailure::Other(_)));
}

fn labelled(origin: &str, uid: &str) -> ObjectMeta {
    ObjectMeta {
        labels: Some(
            [
                (ORIGIN_LABEL.to_string(), origin.to_string()),
                (ORIGIN_UID_LABEL.to_string(), uid.to_string()),
            ]
            .into(),
        ),
        ..ObjectMeta::default()
    }
}

#[test]
fn a_resent_apply_keeps_only_this_origins_mirror_of_that_uid_and_refuses_otherwise() {
    let ours = labelled("hub", "u");
    let older = labelled("hub", "v");
    let foreign = labelled("other-hub", "u");
    let refused = |reason| Err(ApplyFailure::Refused(reason, "not in the policy".into()));
    let rows = [
        // (found, answer)
        (Ok(Some(ours)), Ok(())),
        (Ok(None), refused(RejectReason::NamespaceNotAllowed)),
        (Ok(Some(older)), refused(RejectReason::NamespaceNotAllowed)),
        (
            Ok(Some(foreign)),
            refused(RejectReason::NamespaceNotAllowed),
        ),
        (
            Ok(Some(ObjectMeta::default())),
            refused(RejectReason::NamespaceNotAllowed),
        ),
    ];
    for (found, answer) in rows {
        let shown = format!("{found:?}");
        assert_eq!(
            resent_outside_policy("team-b", "not in the policy".into(), ("hub", "u"), found),
            answer,
            "{shown}"
        );
    }
}

#[test]
fn a_resent_apply_whose_read_failed_is_refused_for_a_reason_that_can_clear() {
    let rows = [
        (RejectReason::Unavailable, RejectReason::Unavailable),
        (RejectReason::Other, RejectReason::Other),
        // A permanent refusal would fail the manager Job: it cannot be
        // told from a read that failed.
        (RejectReason::Invalid, RejectReason::Unavailable),
    ];
    for (failed, reported) in rows {
        let found = Err(ApplyFailure::Refused(failed, "the server is down".into()));
        match resent_outside_policy("team-b", "not in the policy".into(), ("hub", "u"), found) {
            Err(ApplyFailure::Refused(reason, message)) => {
                assert_eq!(reason, reported);
                assert!(!reason.is_permanent());
                assert!(
                    message.contains("team-b") && message.contains("the server is down"),
                    "{message}"
                );
            }
            other => panic!("{failed:?}: {other:?}"),
        }
    }
    let wait = ApplyFailure::Wait("vanished".into());
    assert_eq!(
        resent_outside_policy("team-b", "no".into(), ("hub", "u"), Err(wait.clone())),
        Err(wait)
    );
}

#[test]
fn a_resent_apply_where_the_agent_may_not_read_is_refused_as_before_saying_so() {
    let found = Err(ApplyFailure::Refused(
        RejectReason::Forbidden,
        "jobs.batch \"train\" is forbidden".into(),
    ));
    match resent_outside_policy("team-b", "not in the policy".into(), ("hub", "u"), found) {
        Err(ApplyFailure::Refused(RejectReason::NamespaceNotAllowed, message)) => assert!(
            message.starts_with("not in the policy")
                && message.contains("may not read namespace team-b")
                && message.contains("is forbidden"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
}
