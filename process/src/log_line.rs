//! One log event as one flat JSON object: `ts`, `level`, `msg`, the
//! event's fields beside them, the fields of the spans it happened in (an
//! inner span's, then the event's own, win over an outer one's), `span`
//! (the innermost span's name) and `target`. Log collectors (Loki, Elastic,
//! Cloud Logging) read these names without a parser of their own.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// Writes each event as one flat JSON line. Spans' fields must be recorded
/// as JSON ([`JsonFields`]), which is how [`FlatJson::fields`] records them.
pub struct FlatJson;

impl FlatJson {
    /// The span field recorder the format reads back.
    pub fn fields() -> JsonFields {
        JsonFields::new()
    }
}

/// The event's own fields, `message` as `msg`.
#[derive(Default)]
struct Fields(Map<String, Value>);

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        let name = match field.name() {
            "message" => "msg",
            name => name,
        };
        self.0.insert(name.to_string(), value);
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::from(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::from(format!("{value:?}")));
    }
}

/// The line for an event at `level` from `target`, at `ts`, with `spans`
/// (outermost first: name and recorded fields) and its own `fields`.
pub fn line(
    ts: String,
    level: &str,
    target: &str,
    spans: Vec<(&str, Map<String, Value>)>,
    fields: Map<String, Value>,
) -> Map<String, Value> {
    let mut line = Map::new();
    line.insert("ts".into(), ts.into());
    line.insert("level".into(), level.to_ascii_lowercase().into());
    line.insert("msg".into(), Value::from(""));
    let innermost = spans.last().map(|(name, _)| name.to_string());
    for (_, recorded) in spans {
        line.extend(recorded.into_iter().filter(|(key, _)| !reserved(key)));
    }
    line.extend(
        fields
            .into_iter()
            .filter(|(key, _)| key == "msg" || !reserved(key)),
    );
    if let Some(name) = innermost {
        line.insert("span".into(), name.into());
    }
    line.insert("target".into(), target.into());
    line
}

/// The names the line's own keys take; a field of that name is left out
/// rather than allowed to hide them.
fn reserved(key: &str) -> bool {
    matches!(key, "ts" | "level" | "msg" | "span" | "target")
}

impl<S> FormatEvent<S, JsonFields> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut ts = String::new();
        SystemTime.format_time(&mut Writer::new(&mut ts))?;
        let mut spans = Vec::new();
        for span in ctx
            .event_scope()
            .into_iter()
            .flat_map(|scope| scope.from_root())
        {
            let extensions = span.extensions();
            let recorded = extensions
                .get::<FormattedFields<JsonFields>>()
                .and_then(|fields| serde_json::from_str::<Map<String, Value>>(fields).ok())
                .unwrap_or_default();
            spans.push((span.name(), recorded));
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let metadata = event.metadata();
        let line = line(
            ts,
            metadata.level().as_str(),
            metadata.target(),
            spans,
            fields.0,
        );
        let text = serde_json::to_string(&line).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn the_line_is_flat_with_the_inner_span_and_the_event_winning() {
        let line = line(
            "2026-11-30T10:00:00.000001Z".into(),
            "WARN",
            "jobrelay_manager::session",
            vec![
                (
                    "session",
                    map(json!({"cluster": "worker-a", "job": "outer"})),
                ),
                ("reconcile", map(json!({"job": "ml/train"}))),
            ],
            map(json!({"msg": "mirror refused", "job": "ml/train-2", "code": 403})),
        );
        assert_eq!(
            Value::Object(line),
            json!({
                "ts": "2026-11-30T10:00:00.000001Z",
                "level": "warn",
                "msg": "mirror refused",
                "cluster": "worker-a",
                "job": "ml/train-2",
                "code": 403,
                "span": "reconcile",
                "target": "jobrelay_manager::session",
            })
        );
    }

    #[test]
    fn fields_named_like_the_line_keys_do_not_hide_them() {
        let line = line(
            "t".into(),
            "INFO",
            "x",
            vec![("s", map(json!({"level": "debug", "ts": 1})))],
            map(json!({"target": "elsewhere", "span": "other"})),
        );
        assert_eq!(
            Value::Object(line),
            json!({"ts": "t", "level": "info", "msg": "", "span": "s", "target": "x"})
        );
    }
}
