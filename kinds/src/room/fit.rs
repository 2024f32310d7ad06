//! Whether Pods fit in a cluster's pools: which pools admit them (labels,
//! required node affinity, taints), and how many fit in what those have
//! free. A pool is judged by its sums and its largest free node, not node
//! by node, so a fit here can still miss on the worker, where the
//! scheduler has the last word.

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, Toleration};

use super::pool::{HOSTNAME_LABEL, Pool, Taint};
use super::{PodGroup, Resources};

/// Why Pods do not all fit in a cluster's pools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shortfall {
    /// No pool takes them: labels, node affinity or taints.
    NoPoolAdmits,
    /// Only `fit` of `wanted` Pods fit; what one Pod asks beyond the room
    /// of the best pool that admits them is `short_of` (empty when each
    /// fits but not all do).
    Room {
        fit: i64,
        wanted: i64,
        short_of: Vec<String>,
    },
    /// The worker's own Kueue would queue them in `queue`, a ClusterQueue
    /// with too little quota free of `short_of`.
    Quota {
        queue: String,
        short_of: Vec<String>,
    },
}

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shortfall::NoPoolAdmits => f.write_str(
                "no schedulable node matches its node selector, affinity and tolerations",
            ),
            Shortfall::Room {
                fit,
                wanted,
                short_of,
            } if short_of.is_empty() => write!(f, "room for {fit} of {wanted} Pods"),
            Shortfall::Room {
                fit,
                wanted,
                short_of,
            } => write!(
                f,
                "room for {fit} of {wanted} Pods; short of {}",
                short_of.join(", ")
            ),
            Shortfall::Quota { queue, short_of } => write!(
                f,
                "its Kueue's ClusterQueue {queue} has too little quota free; short of {}",
                short_of.join(", ")
            ),
        }
    }
}

/// Room taken from pools, by pool index, to be given back later.
pub type Taken = Vec<(usize, Resources)>;

/// Whether `group`'s Pods may run on the nodes of `pool`.
pub fn admits(pool: &Pool, group: &PodGroup) -> bool {
    let selected = group
        .node_selector
        .iter()
        .all(|(key, value)| key == HOSTNAME_LABEL || pool.labels.get(key) == Some(value));
    let affine = group.affinity.as_ref().is_none_or(|affinity| {
        affinity.node_selector_terms.iter().any(|term| {
            term.match_expressions
                .iter()
                .flatten()
                .all(|requirement| matches(pool, requirement))
        })
    });
    let tolerated = pool
        .taints
        .iter()
        .all(|taint| group.tolerations.iter().any(|t| tolerates(t, taint)));
    selected && affine && tolerated
}

/// How many Pods that each ask `each` fit in `pool`: as many as its free
/// room holds, but no more on any node than on its largest.
pub fn fitting(pool: &Pool, each: &Resources) -> i64 {
    let per_node = pool.largest.times(each);
    let on_nodes = per_node.saturating_mul(i64::from(pool.nodes));
    pool.free.times(each).min(on_nodes)
}

/// Whether every Pod of `groups` fits in `pools` at once (see [`take`]).
pub fn fits(pools: &[Pool], groups: &[PodGroup]) -> Result<(), Shortfall> {
    match groups {
        [] => Ok(()),
        // One group needs no copy of the pools to count.
        [group] => shortfall(pools, group).map_or(Ok(()), Err),
        _ => take(&mut pools.to_vec(), groups).map(drop),
    }
}

/// Why `group` does not fit in `pools`, if it does not.
fn shortfall(pools: &[Pool], group: &PodGroup) -> Option<Shortfall> {
    if group.pods <= 0 {
        return None;
    }
    let admitting = || pools.iter().filter(|pool| admits(pool, group));
    let Some(best) = admitting().max_by_key(|pool| fitting(pool, &group.each)) else {
        return Some(Shortfall::NoPoolAdmits);
    };
    let fit = admitting()
        .map(|pool| fitting(pool, &group.each))
        .fold(0, i64::saturating_add);
    if fit >= group.pods {
        return None;
    }
    let mut short_of = best.largest.short_of(&group.each);
    if short_of.is_empty() {
        short_of = best.free.short_of(&group.total());
    }
    Some(Shortfall::Room {
        fit,
        wanted: group.pods,
        short_of,
    })
}

/// Takes room for every Pod of `groups` out of `pools`, each group from the
/// pools that admit it, those with room for most of its Pods first.
/// Returns what was taken, or — with `pools` as they were — why the first
/// group that does not fit does not.
pub fn take(pools: &mut [Pool], groups: &[PodGroup]) -> Result<Taken, Shortfall> {
    let mut taken = Taken::new();
    for group in groups {
        let mut order: Vec<(usize, i64)> = pools
            .iter()
            .enumerate()
            .filter(|(_, pool)| admits(pool, group))
            .map(|(index, pool)| (index, fitting(pool, &group.each)))
            .collect();
        if order.is_empty() && group.pods > 0 {
            give_back(pools, &taken);
            return Err(Shortfall::NoPoolAdmits);
        }
        order.sort_by_key(|(index, fit)| (std::cmp::Reverse(*fit), *index));
        let fit: i64 = order
            .iter()
            .map(|(_, fit)| *fit)
            .fold(0, i64::saturating_add);
        if fit < group.pods {
            let best = &pools[order[0].0];
            let mut short_of = best.largest.short_of(&group.each);
            if short_of.is_empty() {
                short_of = best.free.short_of(&group.total());
            }
            give_back(pools, &taken);
            return Err(Shortfall::Room {
                fit,
                wanted: group.pods,
                short_of,
            });
        }
        let mut left = group.pods;
        for (index, fit) in order {
            let here = fit.min(left);
            if here == 0 {
                continue;
            }
            let mut amount = Resources::default();
            amount.add(&group.each, here);
            pools[index].free.add(&amount, -1);
            taken.push((index, amount));
            left -= here;
        }
    }
    Ok(taken)
}

/// Gives room [`take`] took back to `pools`.
pub fn give_back(pools: &mut [Pool], taken: &Taken) {
    for (index, amount) in taken {
        if let Some(pool) = pools.get_mut(*index) {
            pool.free.add(amount, 1);
        }
    }
}

fn matches(pool: &Pool, requirement: &NodeSelectorRequirement) -> bool {
    if requirement.key == HOSTNAME_LABEL {
        // Per node, so not a pool's to refuse; the scheduler picks the node.
        return true;
    }
    let value = pool.labels.get(&requirement.key);
    let values = requirement.values.as_deref().unwrap_or_default();
    let number = |v: &str| v.parse::<i64>().ok();
    let compared = |ordering: std::cmp::Ordering| {
        let bound = values.first().and_then(|v| number(v));
        matches!((value.and_then(|v| number(v)), bound), (Some(v), Some(b)) if v.cmp(&b) == ordering)
    };
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => compared(std::cmp::Ordering::Greater),
        "Lt" => compared(std::cmp::Ordering::Less),
        _ => false,
    }
}

fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => key.is_empty() || key == taint.key,
        _ => key == taint.key && toleration.value.as_deref().unwrap_or_default() == taint.value,
    }
}

#[cfg(test)]
#[path = "fit_tests.rs"]
mod tests;
