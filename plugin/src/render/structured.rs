//! `-o json` and `-o yaml`: the same rows or description as the text
//! output, as structured data with stable field names.

use serde::Serialize;

/// `value` as indented JSON, ending with a newline.
pub fn json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}

/// `value` as YAML.
pub fn yaml<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<String> {
    Ok(serde_yaml_ng::to_string(value)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Row {
        name: &'static str,
        mirrors_lost: u32,
    }

    #[test]
    fn rows_print_as_a_list_of_objects() {
        let rows = [Row {
            name: "train",
            mirrors_lost: 1,
        }];
        assert_eq!(
            json(&rows).expect("JSON"),
            "[\n  {\n    \"name\": \"train\",\n    \"mirrorsLost\": 1\n  }\n]\n"
        );
        assert_eq!(
            yaml(&rows).expect("YAML"),
            "- name: train\n  mirrorsLost: 1\n"
        );
    }
}
