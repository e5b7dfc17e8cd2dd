//! A tool call's arguments as a terminal gives them: one JSON object, or `KEY=VALUE`
//! words (as `edgar mcp prompt` takes its arguments and the MCP Inspector's CLI its
//! `--tool-arg`), each value typed by the tool's accepted schema.

use anyhow::{Context, bail};
use edgar_host::text::shown;
use serde_json::{Map, Value};

/// The words after the tool's name.
pub(super) enum Given {
    /// One JSON object, as written.
    Json(Value),
    /// `KEY=VALUE` words, typed once the tool's schema is known ([`typed`]).
    Pairs(Vec<(String, String)>),
}

/// Reads the words: none is `{}`, one that starts with `{` is JSON, any other word must
/// be `KEY=VALUE` with a key given once.
pub(super) fn parse(words: &[String]) -> anyhow::Result<Given> {
    match words {
        [] => Ok(Given::Json(Value::Object(Map::new()))),
        [one] if one.trim_start().starts_with('{') => serde_json::from_str(one)
            .map(Given::Json)
            .context("the arguments are not valid JSON"),
        _ => {
            let mut pairs: Vec<(String, String)> = Vec::with_capacity(words.len());
            for word in words {
                let Some((key, value)) = word.split_once('=').filter(|(k, _)| !k.is_empty()) else {
                    bail!(
                        "{} is neither a JSON object nor KEY=VALUE: give the arguments as '{{\"key\": \"value\"}}' or as key=value words",
                        shown(word)
                    );
                };
                if pairs.iter().any(|(k, _)| k == key) {
                    bail!("the argument {} is given twice", shown(key));
                }
                pairs.push((key.to_owned(), value.to_owned()));
            }
            Ok(Given::Pairs(pairs))
        }
    }
}

/// The pairs as an object. A value whose property the schema types as a string stays
/// text; any other is read as JSON when it is one (`5`, `true`, `["a", "b"]`), else
/// stays text, for the call's argument check to judge against the schema.
pub(super) fn typed(pairs: Vec<(String, String)>, schema: &Value) -> Value {
    let properties = schema.get("properties");
    let object = pairs
        .into_iter()
        .map(|(key, text)| {
            let text_only = properties.and_then(|p| p.get(&key)).is_some_and(is_text);
            let value = match serde_json::from_str::<Value>(&text) {
                Ok(v) if !text_only => v,
                _ => Value::String(text),
            };
            (key, value)
        })
        .collect();
    Value::Object(object)
}

/// A property that is a string or nothing: `type` `"string"` (or `["string", "null"]`),
/// or an `anyOf`/`oneOf` of such (pydantic writes an optional string so).
fn is_text(property: &Value) -> bool {
    let string_or_null = |t: &Value| t == "string" || t == "null";
    let branches = ["anyOf", "oneOf"]
        .iter()
        .find_map(|k| property.get(*k).and_then(Value::as_array));
    if let Some(branches) = branches {
        let typed = |b: &Value| b.get("type").cloned().unwrap_or(Value::Null);
        return branches.iter().any(|b| typed(b) == "string")
            && branches.iter().all(|b| string_or_null(&typed(b)));
    }
    match property.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(types)) => {
            types.iter().any(|t| t == "string") && types.iter().all(string_or_null)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| (*s).to_owned()).collect()
    }

    fn pairs(w: &[&str]) -> Vec<(String, String)> {
        match parse(&words(w)) {
            Ok(Given::Pairs(p)) => p,
            Ok(Given::Json(v)) => panic!("read as JSON: {v}"),
            Err(e) => panic!("{e:#}"),
        }
    }

    #[test]
    fn a_json_object_or_nothing_is_taken_as_it_is() {
        for (w, want) in [
            (vec![], json!({})),
            (vec![r#"{"a": 1}"#], json!({"a": 1})),
            (vec![r#"  {"a": "x=y"}"#], json!({"a": "x=y"})),
        ] {
            match parse(&words(&w)) {
                Ok(Given::Json(v)) => assert_eq!(v, want),
                _ => panic!("{w:?}"),
            }
        }
        let e = parse(&words(&["{not json"]))
            .err()
            .map(|e| format!("{e:#}"));
        assert!(e.is_some_and(|e| e.contains("not valid JSON")));
    }

    #[test]
    fn words_are_typed_by_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "id": {"type": ["string", "null"]},
            "count": {"type": "integer"},
            "flags": {"type": "array", "items": {"type": "string"}},
            "mode": {"enum": ["fast", "slow"]},
            "since": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        }});
        let got = typed(
            pairs(&[
                "path=123",
                "id=true",
                "count=5",
                "flags=[\"a\",\"b\"]",
                "mode=fast",
                "note=a=b",
                "other=null",
                "since=2024",
                "either=7",
            ]),
            &schema,
        );
        assert_eq!(
            got,
            json!({"path": "123", "id": "true", "count": 5, "flags": ["a", "b"],
                   "mode": "fast", "note": "a=b", "other": null, "since": "2024",
                   "either": 7})
        );
        // Without a schema's word, a number is a number and a word a string.
        assert_eq!(
            typed(pairs(&["n=1.5", "s=hi", "e="]), &json!({})),
            json!({"n": 1.5, "s": "hi", "e": ""})
        );
    }

    #[test]
    fn a_word_that_is_no_pair_or_a_key_given_twice_is_refused() {
        for (w, says) in [
            (vec!["a=1", "loose"], "neither a JSON object nor KEY=VALUE"),
            (vec!["=1"], "neither a JSON object nor KEY=VALUE"),
            (vec!["a=1", "a=2"], "given twice"),
            (vec![r#"{"a": 1}"#, "b=2"], "neither a JSON object"),
        ] {
            let e = parse(&words(&w)).err().map(|e| format!("{e:#}"));
            assert!(
                e.as_deref().is_some_and(|e| e.contains(says)),
                "{w:?}: {e:?}"
            );
        }
    }
}
