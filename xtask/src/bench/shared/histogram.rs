//! Reading a histogram from the manager's `/metrics` text, to show where the
//! time of a step went by the manager's own account (for the status step:
//! worker finished → manager heard it from the agent, and → manager wrote it).

use serde::Serialize;

/// A Prometheus histogram summed over its labels: (upper bound, cumulative
/// count), by ascending bound; `+Inf` last.
pub type Buckets = Vec<(f64, u64)>;

/// The buckets of `name` in `text`, summed over every label set.
pub fn buckets(text: &str, name: &str) -> Buckets {
    let prefix = format!("{name}_bucket{{");
    let mut sums: Vec<(f64, u64)> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with(&prefix)) {
        let Some((labels, count)) = line.rsplit_once("} ") else {
            continue;
        };
        let Some(le) = labels
            .split("le=\"")
            .nth(1)
            .and_then(|l| l.split('"').next())
        else {
            continue;
        };
        let bound = if le == "+Inf" {
            f64::INFINITY
        } else {
            match le.parse() {
                Ok(bound) => bound,
                Err(_) => continue,
            }
        };
        let Ok(count) = count.trim().parse::<f64>() else {
            continue;
        };
        match sums.iter_mut().find(|(b, _)| *b == bound) {
            Some((_, sum)) => *sum += count as u64,
            None => sums.push((bound, count as u64)),
        }
    }
    sums.sort_by(|a, b| a.0.total_cmp(&b.0));
    sums
}

/// Of the observations made between two readings: how many, and the bucket
/// bound under which 50%, 95% and 99% of them fall (seconds; a bound, not an
/// exact quantile).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Bounds {
    pub count: u64,
    pub p50_at_most_s: f64,
    pub p95_at_most_s: f64,
    pub p99_at_most_s: f64,
}

pub fn between(before: &Buckets, after: &Buckets) -> Bounds {
    let counted = |bound: f64| {
        let at = |buckets: &Buckets| {
            buckets
                .iter()
                .find(|(b, _)| *b == bound)
                .map_or(0, |(_, c)| *c)
        };
        at(after).saturating_sub(at(before))
    };
    let count = after.last().map_or(0, |(b, _)| counted(*b));
    let bound = |q: f64| {
        let needed = (q * count as f64).ceil() as u64;
        after
            .iter()
            .map(|(b, _)| *b)
            .find(|b| counted(*b) >= needed)
            .unwrap_or(f64::INFINITY)
    };
    Bounds {
        count,
        p50_at_most_s: bound(0.5),
        p95_at_most_s: bound(0.95),
        p99_at_most_s: bound(0.99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = r#"# HELP jobrelay_status_seconds ...
jobrelay_status_seconds_bucket{cluster="worker-1",le="0.5"} 1
jobrelay_status_seconds_bucket{cluster="worker-1",le="1.0"} 2
jobrelay_status_seconds_bucket{cluster="worker-1",le="+Inf"} 2
jobrelay_status_seconds_count{cluster="worker-1"} 2
"#;

    const AFTER: &str = r#"jobrelay_status_seconds_bucket{cluster="worker-1",le="0.5"} 51
jobrelay_status_seconds_bucket{cluster="worker-1",le="1.0"} 97
jobrelay_status_seconds_bucket{cluster="worker-1",le="+Inf"} 102
jobrelay_status_seconds_bucket{cluster="worker-2",le="0.5"} 50
jobrelay_status_seconds_bucket{cluster="worker-2",le="1.0"} 100
jobrelay_status_seconds_bucket{cluster="worker-2",le="+Inf"} 100
jobrelay_status_heard_seconds_bucket{cluster="worker-2",le="0.5"} 7
"#;

    #[test]
    fn buckets_are_summed_over_clusters_and_kept_apart_from_other_metrics() {
        let after = buckets(AFTER, "jobrelay_status_seconds");
        assert_eq!(after, vec![(0.5, 101), (1.0, 197), (f64::INFINITY, 202)]);
        assert!(buckets(AFTER, "jobrelay_cleanup_seconds").is_empty());
    }

    #[test]
    fn bounds_count_only_what_was_observed_between_the_readings() {
        let before = buckets(BEFORE, "jobrelay_status_seconds");
        let after = buckets(AFTER, "jobrelay_status_seconds");
        let bounds = between(&before, &after);
        assert_eq!(bounds.count, 200);
        assert_eq!(bounds.p50_at_most_s, 0.5, "100 of 200 within 0.5 s");
        assert_eq!(bounds.p95_at_most_s, 1.0);
        assert_eq!(
            bounds.p99_at_most_s,
            f64::INFINITY,
            "5 of 200 beyond the last bound"
        );
        assert_eq!(between(&after, &after).count, 0);
    }
}
