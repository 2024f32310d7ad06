//! How busy each worker was: when each Pod ran and what CPU it asked,
//! noted from a watch of the worker's Pods, and the utilisation drawn from
//! those spans (pure).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use jobrelay_kinds::room::demand;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher::Event;

use crate::bench::shared::measure::{self, Recording};

/// A Pod's run, in seconds since the first Job was created: from its phase
/// first seen `Running` to first seen finished (or gone).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub millicpu: i64,
    pub start: f64,
    pub end: Option<f64>,
}

/// A Pod's run as its watch saw it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    millicpu: i64,
    start: Instant,
    end: Option<Instant>,
}

/// Each Pod's run on one worker, by Pod name.
#[derive(Debug, Clone, Default)]
pub struct Spans(Arc<Mutex<HashMap<String, Seen>>>);

impl Spans {
    /// The runs so far, in seconds since `zero`.
    pub fn since(&self, zero: Instant) -> Vec<Span> {
        let seconds = |at: Instant| at.saturating_duration_since(zero).as_secs_f64();
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(|seen| Span {
                millicpu: seen.millicpu,
                start: seconds(seen.start),
                end: seen.end.map(seconds),
            })
            .collect()
    }
}

/// Notes each Pod's run in `pods` into `spans`.
pub fn record(pods: Api<Pod>, spans: Spans) -> Recording {
    measure::recording(pods, move |event, now| {
        let (pod, gone) = match event {
            Event::Apply(pod) | Event::InitApply(pod) => (pod, false),
            Event::Delete(pod) => (pod, true),
            Event::Init | Event::InitDone => return,
        };
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let running = phase == Some("Running");
        let ended = gone || matches!(phase, Some("Succeeded" | "Failed"));
        let mut spans = spans.0.lock().unwrap_or_else(|p| p.into_inner());
        match spans.get_mut(&pod.name_any()) {
            Some(seen) if ended && seen.end.is_none() => seen.end = Some(now),
            Some(_) => {}
            None if running => {
                let millicpu = pod
                    .spec
                    .as_ref()
                    .map_or(0, |spec| demand::requests(spec).get("cpu"));
                let seen = Seen {
                    millicpu,
                    start: now,
                    end: None,
                };
                spans.insert(pod.name_any(), seen);
            }
            None => {}
        }
    })
}

/// Millicores in use at `t`.
fn used_at(spans: &[Span], t: f64) -> i64 {
    spans
        .iter()
        .filter(|s| s.start <= t && s.end.is_none_or(|end| t < end))
        .map(|s| s.millicpu)
        .sum()
}

/// Utilisation in percent of `room` millicores, every `step` seconds from 0
/// to `until`.
pub fn series(spans: &[Span], room: i64, until: f64, step: f64) -> Vec<(f64, f64)> {
    let steps = (until / step).ceil().max(0.0) as usize;
    (0..=steps)
        .map(|i| {
            let t = (i as f64 * step).min(until);
            (t, percent(used_at(spans, t) as f64, room as f64))
        })
        .collect()
}

/// Mean utilisation in percent of `room` millicores from 0 to `until`: the
/// CPU-time the Pods used in that window over the CPU-time there was.
pub fn mean(spans: &[Span], room: i64, until: f64) -> f64 {
    let used: f64 = spans
        .iter()
        .map(|s| {
            let end = s.end.unwrap_or(until).min(until);
            s.millicpu as f64 * (end - s.start.max(0.0)).max(0.0)
        })
        .sum();
    percent(used, room as f64 * until)
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole <= 0.0 {
        0.0
    } else {
        100.0 * part / whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(millicpu: i64, start: f64, end: Option<f64>) -> Span {
        Span {
            millicpu,
            start,
            end,
        }
    }

    #[test]
    fn a_pod_counts_from_running_until_it_ends() {
        let spans = [span(2000, 1.0, Some(3.0)), span(1000, 2.0, None)];
        let points = series(&spans, 4000, 4.0, 1.0);
        assert_eq!(
            points,
            [
                (0.0, 0.0),
                (1.0, 50.0),
                (2.0, 75.0),
                (3.0, 25.0),
                (4.0, 25.0)
            ]
        );
    }

    #[test]
    fn the_mean_is_cpu_time_used_over_cpu_time_there_was() {
        // 2 CPUs for 2 s and 1 CPU for the last 2 s of 4 s, on 4 CPUs.
        let spans = [span(2000, 1.0, Some(3.0)), span(1000, 2.0, None)];
        assert_eq!(mean(&spans, 4000, 4.0), 100.0 * 6.0 / 16.0);
        // A run cut at the end of the window counts only inside it.
        assert_eq!(mean(&[span(4000, 0.0, Some(10.0))], 4000, 5.0), 100.0);
        assert_eq!(mean(&[], 0, 0.0), 0.0);
    }
}
