//! Model providers' published rules for a tool's name and input schema, as checks. The
//! host runs them on every schema an adapter lowers, so a lowering that a provider would
//! refuse never reaches a request; `edgar guard check` runs them over a whole corpus.
//!
//! Sources: OpenAI's Structured Outputs "Supported schemas" (strict mode) and function
//! name pattern; Anthropic's tool `name` pattern and its refusal of `anyOf`/`oneOf`/
//! `allOf` at the top of `input_schema`; Gemini's `FunctionDeclaration` (name rules) and
//! `Schema` object (the OpenAPI 3.0 subset), plus Gemini's refusals seen in the field:
//! an object below the top without properties, an array without `items`, `anyOf`
//! directly inside `items`.
//!
//! The reference adapter has its own copy of some of these lists (`guest-schema/src/
//! lower/`): on purpose, since the host checks what any adapter returns against the
//! rules as published, not as one adapter understood them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::bindings::wit;

/// A model provider whose rules a tool's schema can be lowered to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Provider {
    /// The accepted schema, as any JSON Schema 2020-12 consumer takes it.
    Generic,
    Anthropic,
    OpenaiStrict,
    Gemini,
}

impl Provider {
    pub const ALL: [Provider; 4] = [
        Provider::Generic,
        Provider::Anthropic,
        Provider::OpenaiStrict,
        Provider::Gemini,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Generic => "generic",
            Provider::Anthropic => "anthropic",
            Provider::OpenaiStrict => "openai-strict",
            Provider::Gemini => "gemini",
        }
    }

    pub(super) fn to_wit(self) -> wit::Provider {
        match self {
            Provider::Generic => wit::Provider::Generic,
            Provider::Anthropic => wit::Provider::Anthropic,
            Provider::OpenaiStrict => wit::Provider::OpenaiStrict,
            Provider::Gemini => wit::Provider::Gemini,
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Provider {
    type Err = String;

    fn from_str(s: &str) -> Result<Provider, String> {
        Provider::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                format!("unknown provider {s:?}; one of generic, anthropic, openai-strict, gemini")
            })
    }
}

/// Most violations listed for one schema.
const MAX_VIOLATIONS: usize = 20;

/// OpenAI strict mode: string formats, keywords, and limits.
const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];
const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "anyOf",
    "$ref",
    "$defs",
    "definitions",
    "description",
    "title",
    "pattern",
    "format",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "minItems",
    "maxItems",
];
const STRICT_MAX_DEPTH: usize = 10;
const STRICT_MAX_PROPERTIES: usize = 5000;
const STRICT_MAX_ENUM_VALUES: usize = 1000;
const STRICT_MAX_STRING_BUDGET: usize = 120_000;
const STRICT_LARGE_ENUM: usize = 250;
const STRICT_LARGE_ENUM_BUDGET: usize = 15_000;

/// Gemini's `Schema` fields.
const GEMINI_KEYWORDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];
const GEMINI_TYPES: &[&str] = &["string", "number", "integer", "boolean", "array", "object"];

/// Every rule of `provider` that the tool name `name` or the lowered `schema` breaks,
/// each as one line naming where.
pub fn violations(provider: Provider, name: &str, schema: &Value) -> Vec<String> {
    let mut v = Violations::default();
    name_rules(provider, name, &mut v);
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        _ => v.add("", "the top level must be {\"type\": \"object\"}"),
    }
    match provider {
        Provider::Generic => {}
        Provider::Anthropic => {
            for key in ["anyOf", "oneOf", "allOf"] {
                if schema.get(key).is_some() {
                    v.add("", format!("{key} at the top level is refused"));
                }
            }
        }
        Provider::OpenaiStrict => strict(schema, schema, "", true, &mut v),
        Provider::Gemini => gemini(schema, "", Place::Root, &mut v),
    }
    if provider == Provider::OpenaiStrict {
        let mut m = Measure::default();
        m.walk(schema);
        if m.depth > STRICT_MAX_DEPTH {
            v.add(
                "",
                format!("{} levels of nesting, over {STRICT_MAX_DEPTH}", m.depth),
            );
        }
        if m.properties > STRICT_MAX_PROPERTIES {
            v.add(
                "",
                format!("{} properties, over {STRICT_MAX_PROPERTIES}", m.properties),
            );
        }
        if m.enum_values > STRICT_MAX_ENUM_VALUES {
            v.add(
                "",
                format!(
                    "{} enum values, over {STRICT_MAX_ENUM_VALUES}",
                    m.enum_values
                ),
            );
        }
        if m.strings > STRICT_MAX_STRING_BUDGET {
            v.add(
                "",
                format!(
                    "{} characters of names and values, over {STRICT_MAX_STRING_BUDGET}",
                    m.strings
                ),
            );
        }
        if let Some(chars) = m.large_enum {
            v.add(
                "",
                format!("an enum of over {STRICT_LARGE_ENUM} values has {chars} characters, over {STRICT_LARGE_ENUM_BUDGET}"),
            );
        }
    }
    v.list
}

/// Arguments with every `null` removed that stands for an absent optional property: a
/// model shown a strict-mode schema must send `null` for what it leaves out, and the
/// accepted schema (which arguments are validated with) may not allow null there. A
/// null the accepted schema allows, or one for a required property, stays.
pub fn without_absent_nulls(schema: &Value, args: Value) -> Value {
    strip_nulls(schema, schema, args, 0)
}

/// Schemas followed this deep at most (through `$ref`s, which may cycle).
const MAX_ARGUMENT_DEPTH: usize = 64;

fn strip_nulls(root: &Value, schema: &Value, value: Value, depth: usize) -> Value {
    if depth > MAX_ARGUMENT_DEPTH {
        return value;
    }
    let schema = match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => match r.strip_prefix('#').and_then(|p| {
            if p.is_empty() {
                Some(root)
            } else {
                root.pointer(p)
            }
        }) {
            Some(target) => return strip_nulls(root, target, value, depth + 1),
            None => schema,
        },
        None => schema,
    };
    match value {
        Value::Object(mut args) => {
            let Some(Value::Object(props)) = schema.get("properties") else {
                return Value::Object(args);
            };
            let required = |k: &str| {
                schema
                    .get("required")
                    .and_then(Value::as_array)
                    .is_some_and(|r| r.iter().any(|x| x == k))
            };
            args.retain(|k, v| {
                !(v.is_null() && !required(k) && props.get(k).is_some_and(|s| !accepts_null(s)))
            });
            for (k, v) in args.iter_mut() {
                if let Some(sub) = props.get(k) {
                    *v = strip_nulls(root, sub, std::mem::take(v), depth + 1);
                }
            }
            Value::Object(args)
        }
        Value::Array(items) => match schema.get("items") {
            Some(sub) => Value::Array(
                items
                    .into_iter()
                    .map(|v| strip_nulls(root, sub, v, depth + 1))
                    .collect(),
            ),
            None => Value::Array(items),
        },
        other => other,
    }
}

/// Whether `schema` may accept null, judged by its keywords (a `$ref` or a combinator
/// counts as maybe, so such a null is left for validation to judge).
fn accepts_null(schema: &Value) -> bool {
    let Value::Object(o) = schema else {
        return schema == &Value::Bool(true);
    };
    if ["$ref", "allOf", "not", "if"]
        .iter()
        .any(|k| o.contains_key(*k))
    {
        return true;
    }
    if let Some(branches) = o
        .get("anyOf")
        .or_else(|| o.get("oneOf"))
        .and_then(Value::as_array)
    {
        return branches.iter().any(accepts_null);
    }
    let typed = match o.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => true,
    };
    let listed = match (o.get("enum"), o.get("const")) {
        (Some(Value::Array(vs)), _) => vs.contains(&Value::Null),
        (_, Some(c)) => c.is_null(),
        _ => true,
    };
    typed && listed
}

#[derive(Default)]
struct Violations {
    list: Vec<String>,
}

impl Violations {
    fn add(&mut self, path: &str, what: impl fmt::Display) {
        if self.list.len() < MAX_VIOLATIONS {
            let path = if path.is_empty() { "/" } else { path };
            self.list.push(format!("{path}: {what}"));
        }
    }
}

fn name_rules(provider: Provider, name: &str, v: &mut Violations) {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let ok = match provider {
        Provider::Generic => true,
        Provider::Anthropic | Provider::OpenaiStrict => {
            (1..=64).contains(&name.len()) && name.chars().all(word)
        }
        Provider::Gemini => {
            (1..=64).contains(&name.len())
                && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| word(c) || c == '.' || c == ':')
        }
    };
    if !ok {
        v.add(
            "",
            format!("the tool name {name:?} breaks {provider}'s name rule"),
        );
    }
}

fn at(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

fn type_names(schema: &Map<String, Value>) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Strict mode: every schema an object with a type, `anyOf` or `$ref`; objects closed
/// and fully required; arrays with `items`; only the supported keywords and formats.
fn strict(root: &Value, schema: &Value, path: &str, top: bool, v: &mut Violations) {
    let Value::Object(o) = schema else {
        v.add(path, "a boolean schema is not accepted");
        return;
    };
    for key in o.keys() {
        if !STRICT_KEYWORDS.contains(&key.as_str()) {
            v.add(&at(path, key), "keyword not supported in strict mode");
        }
        if (key == "$defs" || key == "definitions") && !top {
            v.add(&at(path, key), "definitions only at the top level");
        }
    }
    if let Some(Value::String(r)) = o.get("$ref") {
        let to_defs = r == "#" || r.starts_with("#/$defs/") || r.starts_with("#/definitions/");
        let resolves = r
            .strip_prefix('#')
            .is_some_and(|p| p.is_empty() || root.pointer(p).is_some());
        if !to_defs || !resolves {
            v.add(&at(path, "$ref"), "must resolve to the root or to $defs");
        }
        return;
    }
    if top && o.contains_key("anyOf") {
        v.add(&at(path, "anyOf"), "the top level cannot be anyOf");
    }
    if let Some(Value::Array(bs)) = o.get("anyOf") {
        for (i, b) in bs.iter().enumerate() {
            strict(root, b, &at(&at(path, "anyOf"), &i.to_string()), false, v);
        }
        return;
    }
    let types = type_names(o);
    if types.is_empty() {
        v.add(path, "every schema needs a type, anyOf or $ref");
    }
    if types.contains(&"object") {
        let props = o.get("properties").and_then(Value::as_object);
        match props {
            None => v.add(path, "an object needs properties"),
            Some(props) => {
                let required: Vec<&str> = o
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                for (name, sub) in props {
                    if !required.contains(&name.as_str()) {
                        v.add(&at(&at(path, "properties"), name), "not in required");
                    }
                    strict(root, sub, &at(&at(path, "properties"), name), false, v);
                }
            }
        }
        if o.get("additionalProperties") != Some(&Value::Bool(false)) {
            v.add(path, "additionalProperties must be false");
        }
    }
    if types.contains(&"array") {
        match o.get("items") {
            Some(items) => strict(root, items, &at(path, "items"), false, v),
            None => v.add(path, "an array needs items"),
        }
    }
    if let Some(f) = o.get("format")
        && !f.as_str().is_some_and(|f| STRICT_FORMATS.contains(&f))
    {
        v.add(&at(path, "format"), "format not supported in strict mode");
    }
    if top {
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(defs)) = o.get(key) {
                for (name, d) in defs {
                    strict(root, d, &at(&at(path, key), name), false, v);
                }
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Root,
    Items,
    Other,
}

/// Gemini: the OpenAPI subset, one type per schema, no references.
fn gemini(schema: &Value, path: &str, place: Place, v: &mut Violations) {
    let Value::Object(o) = schema else {
        v.add(path, "a boolean schema is not accepted");
        return;
    };
    for key in o.keys() {
        if !GEMINI_KEYWORDS.contains(&key.as_str()) {
            v.add(&at(path, key), "field not in Gemini's Schema");
        }
    }
    if let Some(Value::Array(bs)) = o.get("anyOf") {
        if place == Place::Items {
            v.add(&at(path, "anyOf"), "anyOf directly inside items is refused");
        }
        for (i, b) in bs.iter().enumerate() {
            gemini(b, &at(&at(path, "anyOf"), &i.to_string()), Place::Other, v);
        }
        if !o.contains_key("type") {
            return;
        }
    }
    let ty = match o.get("type") {
        Some(Value::String(t)) if GEMINI_TYPES.contains(&t.as_str()) => t.as_str(),
        _ => {
            v.add(
                &at(path, "type"),
                "needs one of string, number, integer, boolean, array, object",
            );
            return;
        }
    };
    if let Some(n) = o.get("nullable")
        && !n.is_boolean()
    {
        v.add(&at(path, "nullable"), "must be a boolean");
    }
    if let Some(values) = o.get("enum") {
        let strings = values
            .as_array()
            .is_some_and(|vs| vs.iter().all(Value::is_string));
        if ty != "string" || !strings {
            v.add(&at(path, "enum"), "enums hold strings only");
        }
    }
    if let Some(f) = o.get("format") {
        let ok = matches!(
            (ty, f.as_str()),
            ("string", Some("enum" | "date-time"))
                | ("number", Some("float" | "double"))
                | ("integer", Some("int32" | "int64"))
        );
        if !ok {
            v.add(&at(path, "format"), format!("format not accepted on {ty}"));
        }
    }
    match ty {
        "object" => {
            let props = o.get("properties").and_then(Value::as_object);
            if place != Place::Root && props.is_none_or(Map::is_empty) {
                v.add(path, "an object below the top needs at least one property");
            }
            if let Some(props) = props {
                for (name, sub) in props {
                    gemini(sub, &at(&at(path, "properties"), name), Place::Other, v);
                }
            }
            if let Some(Value::Array(req)) = o.get("required") {
                for r in req {
                    if !r
                        .as_str()
                        .is_some_and(|r| props.is_some_and(|p| p.contains_key(r)))
                    {
                        v.add(
                            &at(path, "required"),
                            format!("{r} is not a declared property"),
                        );
                    }
                }
            }
        }
        "array" => match o.get("items") {
            Some(items) => gemini(items, &at(path, "items"), Place::Items, v),
            None => v.add(path, "an array needs items"),
        },
        _ => {}
    }
}

/// Strict mode's size measures: object nesting, properties, enum values, and the
/// characters of property names, definition names and enum values.
#[derive(Default)]
struct Measure {
    depth: usize,
    properties: usize,
    enum_values: usize,
    strings: usize,
    /// The characters of an enum over [`STRICT_LARGE_ENUM`] values past its own budget.
    large_enum: Option<usize>,
}

impl Measure {
    fn walk(&mut self, schema: &Value) {
        self.depth = self.depth.max(self.level(schema));
    }

    /// Object levels below and including `schema`, counting the rest as it goes.
    fn level(&mut self, schema: &Value) -> usize {
        let Value::Object(o) = schema else {
            return 0;
        };
        let mut below = 0;
        if let Some(Value::Array(values)) = o.get("enum") {
            self.enum_values += values.len();
            let chars: usize = values.iter().filter_map(Value::as_str).map(str::len).sum();
            self.strings += chars;
            if values.len() > STRICT_LARGE_ENUM && chars > STRICT_LARGE_ENUM_BUDGET {
                self.large_enum = Some(chars);
            }
        }
        if let Some(Value::Object(props)) = o.get("properties") {
            self.properties += props.len();
            for (name, sub) in props {
                self.strings += name.len();
                below = below.max(self.level(sub));
            }
        }
        for key in ["$defs", "definitions"] {
            if let Some(Value::Object(defs)) = o.get(key) {
                for (name, sub) in defs {
                    self.strings += name.len();
                    below = below.max(self.level(sub));
                }
            }
        }
        if let Some(items) = o.get("items") {
            below = below.max(self.level(items));
        }
        if let Some(Value::Array(bs)) = o.get("anyOf") {
            for b in bs {
                below = below.max(self.level(b));
            }
        }
        below + usize::from(o.contains_key("properties"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn names_follow_each_providers_pattern() {
        let long = "a".repeat(65);
        for (provider, name, ok) in [
            (Provider::OpenaiStrict, "github__create_issue", true),
            (Provider::OpenaiStrict, "a.b", false),
            (Provider::Anthropic, long.as_str(), false),
            (Provider::Gemini, "1pass__x", false),
            (Provider::Gemini, "_x.y:z-w", true),
            (Provider::Generic, "anything at all", true),
        ] {
            let mut v = violations(provider, name, &json!({"type": "object"}));
            v.retain(|l| l.contains("name rule"));
            assert_eq!(v.is_empty(), ok, "{provider} {name}: {v:?}");
        }
    }

    #[test]
    fn strict_mode_rules() {
        let ok = json!({
            "type": "object",
            "properties": {
                "a": {"type": ["string", "null"], "format": "email"},
                "b": {"$ref": "#/$defs/b"},
                "c": {"anyOf": [{"type": "integer"}, {"type": "null"}]}
            },
            "required": ["a", "b", "c"],
            "additionalProperties": false,
            "$defs": {"b": {"type": "array", "items": {"type": "string"}}}
        });
        assert_eq!(
            violations(Provider::OpenaiStrict, "t", &ok),
            Vec::<String>::new()
        );
        for (bad, why) in [
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}),
                "not in required",
            ),
            (
                json!({"type": "object", "properties": {}}),
                "additionalProperties must be false",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}, "required": ["a"], "additionalProperties": false}),
                "minLength: keyword not supported",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "array"}}, "required": ["a"], "additionalProperties": false}),
                "needs items",
            ),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "#/properties/b"}}, "required": ["a"], "additionalProperties": false}),
                "must resolve",
            ),
            (
                json!({"type": "object", "properties": {"a": {}}, "required": ["a"], "additionalProperties": false}),
                "needs a type",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}, "required": ["a"], "additionalProperties": false}),
                "format not supported",
            ),
        ] {
            let v = violations(Provider::OpenaiStrict, "t", &bad);
            assert!(v.iter().any(|l| l.contains(why)), "{why}: {v:?}");
        }
    }

    #[test]
    fn strict_mode_limits() {
        let mut deep = json!({"type": "string"});
        for _ in 0..11 {
            deep = json!({"type": "object", "properties": {"x": deep}, "required": ["x"], "additionalProperties": false});
        }
        let v = violations(Provider::OpenaiStrict, "t", &deep);
        assert!(v.iter().any(|l| l.contains("11 levels")), "{v:?}");
        let values: Vec<String> = (0..300).map(|i| format!("{i:0>60}")).collect();
        let big = json!({"type": "object", "properties": {"e": {"type": "string", "enum": values}}, "required": ["e"], "additionalProperties": false});
        let v = violations(Provider::OpenaiStrict, "t", &big);
        assert!(
            v.iter().any(|l| l.contains("18000 characters, over 15000")),
            "{v:?}"
        );
    }

    #[test]
    fn gemini_rules() {
        let ok = json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "nullable": true, "enum": ["x"], "format": "enum"},
                "n": {"type": "integer", "format": "int64", "minimum": 0},
                "l": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
                "u": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
            },
            "required": ["a"]
        });
        assert_eq!(violations(Provider::Gemini, "t", &ok), Vec::<String>::new());
        assert!(violations(Provider::Gemini, "t", &json!({"type": "object"})).is_empty());
        for (bad, why) in [
            (
                json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}),
                "needs one of",
            ),
            (
                json!({"type": "object", "properties": {"a": {"$ref": "#"}}}),
                "$ref: field not in",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "integer", "enum": [1]}}}),
                "strings only",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "object"}}}),
                "at least one property",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "array"}}}),
                "needs items",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "array", "items": {"anyOf": [{"type": "string"}]}}}}),
                "inside items",
            ),
            (
                json!({"type": "object", "additionalProperties": false}),
                "additionalProperties: field not in",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}),
                "not a declared property",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string", "format": "email"}}}),
                "format not accepted",
            ),
        ] {
            let v = violations(Provider::Gemini, "t", &bad);
            assert!(v.iter().any(|l| l.contains(why)), "{why}: {v:?}");
        }
    }

    #[test]
    fn nulls_for_absent_optional_properties_are_removed_and_no_others() {
        let schema = json!({
            "type": "object",
            "properties": {
                "opt": {"type": "string"},
                "req": {"type": "string"},
                "nullable": {"type": ["string", "null"]},
                "any": {},
                "nested": {"type": "object", "properties": {"x": {"type": "integer"}}},
                "list": {"type": "array", "items": {"$ref": "#/$defs/item"}}
            },
            "required": ["req"],
            "$defs": {"item": {"type": "object", "properties": {"y": {"enum": ["a"]}}}}
        });
        let args = json!({
            "opt": null, "req": null, "nullable": null, "any": null, "extra": null,
            "nested": {"x": null}, "list": [{"y": null}, {"y": "a"}]
        });
        assert_eq!(
            without_absent_nulls(&schema, args),
            json!({
                "req": null, "nullable": null, "any": null, "extra": null,
                "nested": {}, "list": [{}, {"y": "a"}]
            })
        );
    }

    #[test]
    fn anthropic_refuses_top_level_combinators_only() {
        let nested =
            json!({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}});
        assert!(violations(Provider::Anthropic, "t", &nested).is_empty());
        let top = json!({"type": "object", "oneOf": [{"required": ["a"]}]});
        assert!(!violations(Provider::Anthropic, "t", &top).is_empty());
    }
}
