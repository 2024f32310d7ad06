//! The Events on a manager Job, as `describe` lists them: the manager's
//! steps (`Dispatched`, `RemoteFinished`…), its warnings, and the worker's
//! own warnings passed on as `WorkerWarning`. The manager writes
//! `events.k8s.io/v1` Events with series; read through `core/v1` their time
//! is the series' last observation or the event time, not `lastTimestamp`.

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

/// One Event (or series of them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
    /// Who reported it: `jobrelay-manager`, or another controller.
    pub from: String,
    pub count: i32,
    pub first_seen: Option<Timestamp>,
    pub last_seen: Option<Timestamp>,
}

/// `events` as `describe` lists them, oldest first.
pub fn list(events: &[Event]) -> Vec<EventView> {
    let mut listed: Vec<EventView> = events.iter().map(view).collect();
    listed.sort_by(|a, b| {
        a.last_seen
            .cmp(&b.last_seen)
            .then_with(|| a.reason.cmp(&b.reason))
    });
    listed
}

fn view(event: &Event) -> EventView {
    let first = event
        .event_time
        .as_ref()
        .map(|t| t.0)
        .or_else(|| event.first_timestamp.as_ref().map(|t| t.0));
    let last = event
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref())
        .map(|t| t.0)
        .or_else(|| event.last_timestamp.as_ref().map(|t| t.0))
        .or(first);
    let count = event
        .series
        .as_ref()
        .and_then(|s| s.count)
        .or(event.count)
        .unwrap_or(1)
        .max(1);
    let from = event
        .reporting_component
        .clone()
        .filter(|c| !c.is_empty())
        .or_else(|| event.source.as_ref().and_then(|s| s.component.clone()))
        .unwrap_or_default();
    EventView {
        type_: event.type_.clone().unwrap_or_else(|| "Normal".into()),
        reason: event.reason.clone().unwrap_or_default(),
        message: event.message.clone().unwrap_or_default(),
        from,
        count,
        first_seen: first,
        last_seen: last,
    }
}

/// The AGE column of an Event, as `kubectl describe` writes it:
/// `5m`, or `2m (x3 over 10m)` for a series.
pub fn age(event: &EventView, now: Timestamp) -> String {
    let last = super::age::since(event.last_seen, now);
    match event.count {
        1 => last,
        n => {
            let over = super::age::since(event.first_seen, now);
            format!("{last} (x{n} over {over})")
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A Event as the manager writes it (`events.k8s.io/v1`), read through
    /// `core/v1`.
    pub(crate) fn event(
        reason: &str,
        at: &str,
        series: Option<(i32, &str)>,
        message: &str,
    ) -> Event {
        let mut event = json!({
            "metadata": {"name": format!("train.{reason}"), "namespace": "ml"},
            "involvedObject": {"kind": "Job", "name": "train", "namespace": "ml", "uid": "uid-train"},
            "reason": reason,
            "message": message,
            "type": if reason == "Dispatched" { "Normal" } else { "Warning" },
            "eventTime": at,
            "reportingComponent": "jobrelay-manager",
        });
        if let Some((count, last)) = series {
            event["series"] = json!({"count": count, "lastObservedTime": last});
        }
        serde_json::from_value(event).expect("an Event")
    }

    #[test]
    fn events_are_listed_oldest_first_by_when_last_seen() {
        let events = [
            event(
                "PodsWaiting",
                "2026-11-28T11:56:10.000000Z",
                Some((3, "2026-11-28T11:59:00.000000Z")),
                "waits",
            ),
            event("Dispatched", "2026-11-28T11:56:00.000000Z", None, "sent"),
            event(
                "WorkerWarning",
                "2026-11-28T11:57:00.000000Z",
                None,
                "on cluster worker-1, Pod train-x: FailedMount",
            ),
        ];
        let listed = list(&events);
        let reasons: Vec<&str> = listed.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(reasons, ["Dispatched", "WorkerWarning", "PodsWaiting"]);
        let now: Timestamp = "2026-11-28T12:00:00Z".parse().expect("a time");
        assert_eq!(age(&listed[0], now), "4m");
        assert_eq!(age(&listed[2], now), "60s (x3 over 3m50s)");
        assert_eq!(listed[2].from, "jobrelay-manager");
        assert_eq!(listed[1].type_, "Warning");
    }

    #[test]
    fn an_event_of_the_older_api_reads_its_timestamps_and_source() {
        let old: Event = serde_json::from_value(json!({
            "metadata": {"name": "train.1"},
            "involvedObject": {},
            "reason": "SuccessfulCreate",
            "firstTimestamp": "2026-11-28T11:50:00Z",
            "lastTimestamp": "2026-11-28T11:58:00Z",
            "count": 2,
            "source": {"component": "job-controller"},
        }))
        .expect("an Event");
        let shown = list(&[old]);
        assert_eq!(shown[0].from, "job-controller");
        assert_eq!(shown[0].count, 2);
        assert_eq!(shown[0].type_, "Normal");
        let now: Timestamp = "2026-11-28T12:00:00Z".parse().expect("a time");
        assert_eq!(age(&shown[0], now), "2m (x2 over 10m)");
    }
}
