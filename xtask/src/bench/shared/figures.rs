//! Throughput and latency statistics of one measure.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;

/// Throughput and latency of one measure.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub jobs: usize,
    pub seconds: f64,
    pub jobs_per_second: f64,
    pub p50_ms: u128,
    pub p95_ms: u128,
    pub p99_ms: u128,
    pub max_ms: u128,
}

impl Figures {
    /// From per-name start and end times: throughput over the whole span
    /// (first start to last end) and the latency distribution.
    pub fn between(
        names: &[String],
        from: &HashMap<String, Instant>,
        to: &HashMap<String, Instant>,
    ) -> Figures {
        let mut latencies: Vec<Duration> = names
            .iter()
            .filter_map(|n| Some(to.get(n)?.saturating_duration_since(*from.get(n)?)))
            .collect();
        latencies.sort();
        let first = names.iter().filter_map(|n| from.get(n)).min();
        let last = names.iter().filter_map(|n| to.get(n)).max();
        let span = match (first, last) {
            (Some(first), Some(last)) => last.saturating_duration_since(*first),
            _ => Duration::ZERO,
        };
        Figures {
            jobs: latencies.len(),
            seconds: span.as_secs_f64(),
            jobs_per_second: rate(latencies.len(), span),
            p50_ms: percentile(&latencies, 50).as_millis(),
            p95_ms: percentile(&latencies, 95).as_millis(),
            p99_ms: percentile(&latencies, 99).as_millis(),
            max_ms: percentile(&latencies, 100).as_millis(),
        }
    }
}

/// `part` over `whole`, a whole of zero counted as the least positive number.
pub fn ratio(part: f64, whole: f64) -> f64 {
    part / whole.max(f64::MIN_POSITIVE)
}

pub fn rate(count: usize, span: Duration) -> f64 {
    if span.is_zero() {
        return 0.0;
    }
    count as f64 / span.as_secs_f64()
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() * p).div_ceil(100)).clamp(1, sorted.len()) - 1;
    sorted[index]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_take_throughput_over_the_whole_span_and_percentiles_per_job() {
        let t0 = Instant::now();
        let names: Vec<String> = (0..100).map(|i| format!("j{i}")).collect();
        let from: HashMap<String, Instant> = names.iter().map(|n| (n.clone(), t0)).collect();
        let to: HashMap<String, Instant> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), t0 + Duration::from_millis(10 * (i as u64 + 1))))
            .collect();
        let figures = Figures::between(&names, &from, &to);
        assert_eq!(figures.jobs, 100);
        assert_eq!(figures.p50_ms, 500);
        assert_eq!(figures.p99_ms, 990);
        assert_eq!(figures.max_ms, 1000);
        assert!((figures.jobs_per_second - 100.0).abs() < 0.01);
    }
}
