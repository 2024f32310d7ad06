//! How long a cut-off agent waits before it fences, against how long the
//! manager waits before it gives the cluster up as Lost. An agent that has
//! heard no manager for `fenceAfter` suspends every mirror it holds and
//! waits for their Pods to be gone; the manager marks the cluster Lost (and
//! may place its Jobs elsewhere) only after `lostAfter`. The margin between
//! the two is the time the mirrors' Pods have to stop, so a Job placed again
//! never runs beside its old copy.

use std::time::Duration;

/// The least `lostAfter − fenceAfter`: the Pods of a fenced mirror need
/// this long at least to be gone before the manager may place the Job
/// elsewhere. More is needed where Pods take longer to stop (their
/// `terminationGracePeriodSeconds`).
pub const MIN_MARGIN: Duration = Duration::from_secs(10);

/// The shortest `fenceAfter`: a shorter one would suspend every mirror on a
/// blip of the network.
pub const MIN_FENCE_AFTER: Duration = Duration::from_secs(10);

/// Of `lostAfter`, the share kept as margin when `fenceAfter` is not set
/// (2/15: 13m of 15m), if larger than [`MIN_MARGIN`].
const DEFAULT_MARGIN_FIFTEENTHS: u32 = 2;

/// A cluster's two clocks, checked against each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fencing {
    pub lost_after: Duration,
    pub fence_after: Duration,
}

/// A cluster whose spec sets neither: Lost after 15m, fenced after 13m.
pub const DEFAULT: Fencing = Fencing {
    lost_after: Duration::from_secs(15 * 60),
    fence_after: Duration::from_secs(13 * 60),
};

/// Which field a refused pair is refused for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "{lost_after:?} leaves the agent no time to fence: it must be at least {:?} (fenceAfter at least {MIN_FENCE_AFTER:?}, then {MIN_MARGIN:?} for the Pods to stop)",
        MIN_FENCE_AFTER + MIN_MARGIN
    )]
    LostAfter { lost_after: Duration },
    #[error(
        "{fence_after:?} must be at least {MIN_FENCE_AFTER:?} and at least {MIN_MARGIN:?} shorter than lostAfter ({lost_after:?}), so the agent has suspended its mirrors before the cluster is Lost"
    )]
    FenceAfter {
        fence_after: Duration,
        lost_after: Duration,
    },
}

/// The fencing of a cluster with `lost_after`, and `fence_after` if its
/// spec sets one; else the default, `lost_after` less its margin.
pub fn fencing(lost_after: Duration, fence_after: Option<Duration>) -> Result<Fencing, Refused> {
    let fence_after = match fence_after {
        Some(fence_after) => {
            if fence_after < MIN_FENCE_AFTER || lost_after.saturating_sub(fence_after) < MIN_MARGIN
            {
                return Err(Refused::FenceAfter {
                    fence_after,
                    lost_after,
                });
            }
            fence_after
        }
        None => {
            let share = lost_after * DEFAULT_MARGIN_FIFTEENTHS / 15;
            let fence_after = lost_after.saturating_sub(share.max(MIN_MARGIN));
            if fence_after < MIN_FENCE_AFTER {
                return Err(Refused::LostAfter { lost_after });
            }
            fence_after
        }
    };
    Ok(Fencing {
        lost_after,
        fence_after,
    })
}

/// The CEL rules the API server checks on a WorkerCluster's spec (whose
/// `lostAfter` defaults to `default_lost_after`), so a pair the manager
/// would refuse is refused when it is written.
pub fn rules(default_lost_after: Duration) -> serde_json::Value {
    let lost = format!(
        "duration(has(self.lostAfter) ? self.lostAfter : '{}s')",
        default_lost_after.as_secs()
    );
    serde_json::json!([
        {
            "rule": format!(
                "!has(self.fenceAfter) || ({lost} - duration(self.fenceAfter) >= duration('{}s') && duration(self.fenceAfter) >= duration('{}s'))",
                MIN_MARGIN.as_secs(),
                MIN_FENCE_AFTER.as_secs(),
            ),
            "message": format!(
                "spec.fenceAfter must be at least {}s, and at least {}s shorter than spec.lostAfter (default {}s), so the agent has suspended its mirrors before the cluster is Lost",
                MIN_FENCE_AFTER.as_secs(),
                MIN_MARGIN.as_secs(),
                default_lost_after.as_secs(),
            ),
            "fieldPath": ".fenceAfter",
        },
        {
            "rule": format!(
                "has(self.fenceAfter) || {lost} >= duration('{}s')",
                (MIN_FENCE_AFTER + MIN_MARGIN).as_secs(),
            ),
            "message": format!(
                "spec.lostAfter must be at least {}s: the agent fences after it has heard no manager for fenceAfter (at least {}s), and the Pods need {}s more to stop",
                (MIN_FENCE_AFTER + MIN_MARGIN).as_secs(),
                MIN_FENCE_AFTER.as_secs(),
                MIN_MARGIN.as_secs(),
            ),
            "fieldPath": ".lostAfter",
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn by_default_the_agent_fences_two_fifteenths_before_the_cluster_is_lost() {
        assert_eq!(fencing(DEFAULT.lost_after, None), Ok(DEFAULT));
        assert_eq!(fencing(secs(300), None).unwrap().fence_after, secs(260));
    }

    #[test]
    fn a_short_lost_after_keeps_at_least_the_least_margin() {
        assert_eq!(fencing(secs(20), None).unwrap().fence_after, secs(10));
        assert_eq!(fencing(secs(60), None).unwrap().fence_after, secs(50));
    }

    #[test]
    fn a_lost_after_too_short_to_fence_in_is_refused_for_that_field() {
        assert_eq!(
            fencing(secs(19), None),
            Err(Refused::LostAfter {
                lost_after: secs(19)
            })
        );
    }

    #[test]
    fn a_fence_after_set_is_taken_when_it_leaves_the_margin() {
        let set = fencing(secs(60), Some(secs(30))).unwrap();
        assert_eq!(set.fence_after, secs(30));
        assert!(fencing(secs(60), Some(secs(50))).is_ok());
    }

    #[test]
    fn a_fence_after_without_margin_or_too_short_is_refused_for_that_field() {
        for fence_after in [secs(51), secs(60), secs(90), secs(9)] {
            let refused = fencing(secs(60), Some(fence_after)).unwrap_err();
            assert!(
                matches!(refused, Refused::FenceAfter { .. }),
                "{fence_after:?}: {refused}"
            );
        }
    }

    #[test]
    fn the_api_server_checks_the_same_bounds() {
        let rules = rules(secs(900)).to_string();
        assert!(rules.contains("duration('10s')"), "{rules}");
        assert!(rules.contains("duration('20s')"), "{rules}");
        assert!(rules.contains("self.lostAfter : '900s'"), "{rules}");
    }
}
