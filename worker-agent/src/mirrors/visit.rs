//! Which mirrors a pass of the agent looks at: those whose Job or Pods
//! changed, not every mirror held, so the cost of a pass follows what
//! happened, not how many mirrors the worker runs. Waiting on the clock
//! (a delete to send again, a Pod outliving its grace) is looked at on the
//! periodic tick; everything, on the slower full pass and whenever the view
//! may have shifted underneath (a relist, a new session, a new DesiredSet).

use std::collections::HashSet;

use crate::watched::Changed;

/// Why a pass runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// A watch saw something change, or the manager sent work.
    Changes,
    /// The periodic tick: what waits on the clock too.
    Tick,
    /// The slow periodic pass over everything.
    Full,
}

/// The origin UIDs a pass looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visit {
    Everything,
    These(HashSet<String>),
}

/// What `pass` looks at, given what the watches saw change, what the agent
/// itself started since the last pass (`due`), whether everything must be
/// looked at again (`everything_due`), and the mirrors waiting on the clock
/// (being deleted, or with Pods in their grace).
pub fn to_visit<'a>(
    pass: Pass,
    changed: Changed,
    due: HashSet<String>,
    everything_due: bool,
    waiting_on_the_clock: impl Iterator<Item = &'a String>,
) -> Visit {
    if pass == Pass::Full || changed.everything || everything_due {
        return Visit::Everything;
    }
    let mut uids = changed.uids;
    uids.extend(due);
    if pass == Pass::Tick {
        uids.extend(waiting_on_the_clock.cloned());
    }
    Visit::These(uids)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(uids: &[&str]) -> HashSet<String> {
        uids.iter().map(|u| u.to_string()).collect()
    }

    fn changed(uids: &[&str]) -> Changed {
        Changed {
            uids: set(uids),
            everything: false,
        }
    }

    fn waiting() -> Vec<String> {
        vec!["deleting".into()]
    }

    #[test]
    fn a_change_pass_looks_at_what_changed_and_what_the_agent_started() {
        let visit = to_visit(
            Pass::Changes,
            changed(&["u1"]),
            set(&["u2"]),
            false,
            waiting().iter(),
        );
        assert_eq!(
            visit,
            Visit::These(set(&["u1", "u2"])),
            "waiting on the clock is the tick's"
        );
    }

    #[test]
    fn the_tick_also_looks_at_what_waits_on_the_clock() {
        let visit = to_visit(
            Pass::Tick,
            changed(&["u1"]),
            set(&[]),
            false,
            waiting().iter(),
        );
        assert_eq!(visit, Visit::These(set(&["u1", "deleting"])));
    }

    #[test]
    fn nothing_changed_nothing_looked_at() {
        let visit = to_visit(
            Pass::Changes,
            changed(&[]),
            set(&[]),
            false,
            waiting().iter(),
        );
        assert_eq!(visit, Visit::These(set(&[])));
    }

    #[test]
    fn everything_on_the_full_pass_after_a_relist_and_when_asked() {
        assert_eq!(
            to_visit(Pass::Full, changed(&[]), set(&[]), false, waiting().iter()),
            Visit::Everything
        );
        let relisted = Changed {
            uids: set(&[]),
            everything: true,
        };
        assert_eq!(
            to_visit(Pass::Changes, relisted, set(&[]), false, waiting().iter()),
            Visit::Everything
        );
        assert_eq!(
            to_visit(
                Pass::Changes,
                changed(&[]),
                set(&[]),
                true,
                waiting().iter()
            ),
            Visit::Everything
        );
    }
}
