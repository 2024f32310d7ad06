//! What the machine's cores allow a relayed step at best. A step that kept
//! every core busy from its first request to its last Job could not go
//! faster than cores ÷ the CPU it spent per Job; set beside the step's
//! physical limit (the raw run, the direct cleanup, the raw burst), that
//! bound says whether jobrelay's figure was held back by a wait of its own
//! or by a machine already full.
//!
//! Two bounds: with every program of the step on this machine's cores, as
//! in the bench; and with the manager's cluster and jobrelay's manager
//! replicas on cores of their own, as they are when the manager cluster is
//! another machine.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::bench::shared::figures::ratio;

/// The bench's own watches and requests: a cost of measuring, counted in no
/// bound.
const BENCH_CLIENT: &str = "bench client";
/// The one store every cluster of the bench shares, each under its prefix.
const SHARED_STORE: &str = "etcd";
const API_SERVER: &str = "kube-apiserver";
const MANAGER_BINARY: &str = "jobrelay-manager";

/// A bound on a ratio to a physical limit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bound {
    /// Every program of the step on this machine's cores.
    pub this_machine: f64,
    /// The manager's cluster and replicas on cores of their own.
    pub manager_apart: f64,
}

/// The best ratio of Jobs per second to `limit_per_second` a step of `jobs`
/// that spent `used` (CPU seconds by program) could reach on `cores`.
pub fn rate_ceiling(
    cores: f64,
    used: &BTreeMap<String, f64>,
    manager_cluster: &str,
    jobs: usize,
    limit_per_second: f64,
) -> Bound {
    bound(used, manager_cluster, |cpu| {
        ratio(ratio(cores * jobs as f64, cpu), limit_per_second)
    })
}

/// The least ratio of the time a step that spent `used` took on `cores` to
/// `limit_seconds`, the time its physical limit took.
pub fn time_floor(
    cores: f64,
    used: &BTreeMap<String, f64>,
    manager_cluster: &str,
    limit_seconds: f64,
) -> Bound {
    bound(used, manager_cluster, |cpu| {
        ratio(cpu / cores, limit_seconds)
    })
}

/// `of_cpu` of the CPU seconds counted against the step, with every program
/// and with the manager's side apart.
fn bound(
    used: &BTreeMap<String, f64>,
    manager_cluster: &str,
    of_cpu: impl Fn(f64) -> f64,
) -> Bound {
    let (all, workers) = counted(used, manager_cluster);
    Bound {
        this_machine: of_cpu(all),
        manager_apart: of_cpu(workers),
    }
}

/// CPU seconds counted against a step: every program's but the bench
/// client's; and of those, what the workers' programs and the agents spent.
/// The shared store's seconds are split between the two sides as the API
/// servers' are, since each side's writes are what it stores.
fn counted(used: &BTreeMap<String, f64>, manager_cluster: &str) -> (f64, f64) {
    let on_manager_side = |program: &str| {
        program.starts_with(MANAGER_BINARY)
            || program
                .rsplit_once(' ')
                .is_some_and(|(_, c)| c == manager_cluster)
    };
    let (mut all, mut manager, mut store) = (0.0, 0.0, 0.0);
    let (mut servers, mut manager_server) = (0.0, 0.0);
    for (program, &seconds) in used {
        if program == BENCH_CLIENT {
            continue;
        }
        all += seconds;
        if program == SHARED_STORE {
            store += seconds;
            continue;
        }
        let manager_side = on_manager_side(program);
        if manager_side {
            manager += seconds;
        }
        if program.starts_with(API_SERVER) {
            servers += seconds;
            if manager_side {
                manager_server += seconds;
            }
        }
    }
    let manager_store = match servers > 0.0 {
        true => store * manager_server / servers,
        false => 0.0,
    };
    (all, all - manager - manager_store)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// CPU seconds by program, as a step records them.
    pub(in crate::bench::jobs) fn used(programs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        programs.iter().map(|(p, s)| (p.to_string(), *s)).collect()
    }

    #[test]
    fn a_step_that_spent_one_core_second_per_job_can_run_two_jobs_a_second_on_two_cores() {
        let spent = used(&[("kube-apiserver worker-1", 100.0)]);
        let bound = rate_ceiling(2.0, &spent, "manager", 100, 4.0);
        assert_eq!(bound.this_machine, 0.5);
        assert_eq!(bound.manager_apart, 0.5);
    }

    #[test]
    fn the_bench_client_is_counted_nowhere() {
        let spent = used(&[("kube-apiserver worker-1", 50.0), ("bench client", 50.0)]);
        let bound = rate_ceiling(2.0, &spent, "manager", 100, 4.0);
        assert_eq!(bound.this_machine, 1.0);
    }

    #[test]
    fn the_manager_cluster_and_replicas_drop_out_of_the_bound_with_the_manager_apart() {
        let spent = used(&[
            ("kube-apiserver manager", 30.0),
            ("kube-controller-manager manager", 10.0),
            ("jobrelay-manager", 5.0),
            ("jobrelay-manager manager", 5.0),
            ("kube-apiserver worker-1", 30.0),
            ("jobrelay-agent worker-1", 10.0),
            ("kwok worker-1", 10.0),
        ]);
        let bound = rate_ceiling(1.0, &spent, "manager", 100, 1.0);
        assert_eq!(bound.this_machine, 1.0);
        assert_eq!(bound.manager_apart, 2.0);
    }

    #[test]
    fn the_shared_store_is_split_as_the_api_servers_are() {
        let spent = used(&[
            ("kube-apiserver manager", 30.0),
            ("kube-apiserver worker-1", 60.0),
            ("etcd", 9.0),
            ("kwok worker-1", 1.0),
        ]);
        // The workers' side: 60 + 1 + two thirds of the store's 9.
        let floor = time_floor(1.0, &spent, "manager", 67.0);
        assert_eq!(floor.this_machine, 100.0 / 67.0);
        assert_eq!(floor.manager_apart, 1.0);
    }

    #[test]
    fn a_time_floor_is_the_cpu_spread_over_every_core_against_the_limit() {
        let spent = used(&[("kube-apiserver worker-1", 120.0)]);
        let floor = time_floor(2.0, &spent, "manager", 40.0);
        assert_eq!(floor.this_machine, 1.5);
        // Nothing on the manager's side: the same bound either way.
        assert_eq!(floor.manager_apart, 1.5);
    }
}
