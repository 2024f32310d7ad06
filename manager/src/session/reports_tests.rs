use super::*;

#[test]
fn the_same_deletions_held_again_is_not_news() {
    let held = |unknown, live| DeletionsHeld {
        unknown,
        live,
        ..DeletionsHeld::default()
    };
    let mut last = None;
    assert!(news(&mut last, &held(30, 40)), "the first");
    for _ in 0..1000 {
        assert!(!news(&mut last, &held(30, 40)), "a flood of the same");
    }
    assert!(news(&mut last, &held(31, 40)), "changed figures");
    let released = DeletionsHeld {
        released: 5,
        ..held(31, 40)
    };
    assert!(news(&mut last, &released), "released held too");
}

#[test]
fn the_note_names_what_the_brake_holds() {
    let held = |unknown, released| DeletionsHeld {
        unknown,
        released,
        live: 40,
        confirm_in: None,
    };
    let minute = Duration::from_secs(60);
    let note = |u, r| held_note(&held(u, r), minute);
    assert!(
        note(30, 0)
            .starts_with("the agent holds 30 of 40 live mirrors this manager does not know:")
    );
    assert!(
        note(0, 30).starts_with("the agent holds 30 of 40 live mirrors this manager released:")
    );
    assert!(
        note(10, 25)
            .contains("10 of 40 live mirrors this manager does not know and 25 it released")
    );
    assert!(note(30, 0).contains("deleted in 60s"));
}
