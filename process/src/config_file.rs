//! Configuration files of both binaries: YAML, read once at start; an empty
//! file means every default. What the values mean, and their validation
//! into typed values, is each binary's own.

use std::collections::BTreeSet;
use std::path::Path;

use serde::de::DeserializeOwned;

/// A configuration file that cannot be read or is not the expected YAML.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Syntax { path: String, message: String },
    #[error("{path}: {source}")]
    Duration {
        path: String,
        #[source]
        source: jobrelay_proto::duration::FieldError,
    },
}

/// Reads a configuration file's text.
pub fn read(path: &Path) -> Result<String, FileError> {
    std::fs::read_to_string(path).map_err(|source| FileError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// Reads the file at `path` and has `parse` validate its text (given the
/// path to name in errors).
pub fn load<T, E: From<FileError>>(
    path: &Path,
    parse: impl FnOnce(&str, &str) -> Result<T, E>,
) -> Result<T, E> {
    let text = read(path)?;
    parse(&path.display().to_string(), &text)
}

/// Reads the duration field `field` of the file at `path` (absent: `None`);
/// a bad value names the file, the field and the value.
pub fn duration(
    path: &str,
    field: &'static str,
    value: Option<&str>,
) -> Result<Option<std::time::Duration>, FileError> {
    jobrelay_proto::duration::parse_field(field, value).map_err(|source| FileError::Duration {
        path: path.into(),
        source,
    })
}

/// Parses configuration text (blank: the defaults); `path` names it in
/// errors, which name the offending field.
pub fn parse<T: DeserializeOwned + Default>(path: &str, text: &str) -> Result<T, FileError> {
    if text.trim().is_empty() {
        return Ok(T::default());
    }
    serde_yaml_ng::from_str(text).map_err(|e| FileError::Syntax {
        path: path.into(),
        message: e.to_string(),
    })
}

/// The field paths (`retention.afterDeactivated`) of a JSON schema's object
/// properties, following `$ref`s into `root`'s `$defs` and through
/// `anyOf`/`oneOf`: how a configuration type's schema and the chart's values
/// schema are compared, so neither accepts a field the other lacks.
pub fn schema_fields(schema: &serde_json::Value, root: &serde_json::Value) -> BTreeSet<String> {
    let mut fields = BTreeSet::new();
    collect_fields(schema, root, "", &mut fields);
    fields
}

/// The chart's values schema (`values.schema.json`).
const CHART_VALUES_SCHEMA: &str = include_str!("../../deploy/helm/jobrelay/values.schema.json");

/// The field paths the chart's values schema allows in `<part>.config`, the
/// configuration file of the manager or the agent.
pub fn chart_config_fields(values_schema: &serde_json::Value, part: &str) -> BTreeSet<String> {
    let config = &values_schema["properties"][part]["properties"]["config"];
    schema_fields(config, values_schema)
}

/// For a binary's tests: fails unless the chart's values schema takes in
/// `<part>.config` exactly the fields of `config_schema` (the JSON schema
/// of the configuration file's type), and its durations follow the
/// binaries' grammar.
pub fn assert_chart_takes_the_file(part: &str, config_schema: &serde_json::Value) {
    let chart: serde_json::Value =
        serde_json::from_str(CHART_VALUES_SCHEMA).expect("the chart's values schema is JSON");
    assert_eq!(
        chart_config_fields(&chart, part),
        schema_fields(config_schema, config_schema),
        "{part}.config in values.schema.json against the configuration file's fields"
    );
    assert_eq!(
        chart["$defs"]["duration"]["pattern"].as_str(),
        Some(jobrelay_proto::duration::PATTERN),
        "the chart's durations follow the binaries' grammar"
    );
}

fn collect_fields(
    schema: &serde_json::Value,
    root: &serde_json::Value,
    prefix: &str,
    fields: &mut BTreeSet<String>,
) {
    if let Some(target) = schema["$ref"].as_str() {
        let name = target.trim_start_matches("#/$defs/");
        return collect_fields(&root["$defs"][name], root, prefix, fields);
    }
    for alternatives in ["anyOf", "oneOf"] {
        for alternative in schema[alternatives].as_array().into_iter().flatten() {
            collect_fields(alternative, root, prefix, fields);
        }
    }
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        let path = match prefix {
            "" => name.clone(),
            _ => format!("{prefix}.{name}"),
        };
        fields.insert(path.clone());
        collect_fields(property, root, &path, fields);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Raw {
        every: Option<String>,
    }

    #[test]
    fn blank_is_the_defaults_and_an_unknown_field_is_named() {
        assert_eq!(parse::<Raw>("c.yaml", " \n").unwrap(), Raw::default());
        assert_eq!(
            parse::<Raw>("c.yaml", "every: 5m\n")
                .unwrap()
                .every
                .as_deref(),
            Some("5m")
        );
        let error = parse::<Raw>("c.yaml", "evry: 5m\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("c.yaml: ") && error.contains("evry"),
            "{error}"
        );
        let missing = read(Path::new("/nonexistent/jobrelay.yaml"))
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("reading /nonexistent/jobrelay.yaml"),
            "{missing}"
        );
    }

    #[test]
    fn schema_fields_follow_refs_and_alternatives() {
        let schema = serde_json::json!({
            "properties": {
                "a": {"$ref": "#/$defs/inner"},
                "b": {"anyOf": [{"$ref": "#/$defs/inner"}, {"type": "null"}]},
                "c": {"type": "string"},
            },
            "$defs": {"inner": {"properties": {"x": {"type": "string"}}}},
        });
        let fields: Vec<String> = schema_fields(&schema, &schema).into_iter().collect();
        assert_eq!(fields, ["a", "a.x", "b", "b.x", "c"]);
    }
}
