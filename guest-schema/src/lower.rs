//! `lower_schema`: an accepted input schema lowered to one model provider's rules, with
//! a report of every constraint dropped or weakened. A value constraint the provider
//! cannot carry (a `format`, a length bound, a `default`) is also written into the
//! schema's description, so the model still reads it; the host enforces it either way,
//! because it validates arguments with the accepted schema.

mod gemini;
mod strict;

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::limits::{MAX_SCHEMA_BYTES, MAX_SCHEMA_TEXT_BYTES};
use crate::schema::{Notes, escape, resolve};
use crate::text::clamp;
use crate::types::{Dropped, Rejection, RejectionKind};

/// The WIT `provider`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Generic,
    Anthropic,
    OpenAiStrict,
    Gemini,
}

/// The WIT `lowered-schema`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoweredSchema {
    pub input_schema: String,
    pub losses: Vec<Dropped>,
}

/// Most losses listed for one tool; the rest are counted in one last entry.
pub const MAX_LOSSES: usize = 500;
/// Most schema nodes one lowering may produce: inlining `$ref`s can multiply a schema.
const MAX_NODES: usize = 20_000;
/// Longest constraint quoted into a description.
const MAX_SAID: usize = 120;

/// Keywords that only annotate: a provider without them loses nothing it enforced.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$anchor",
    "$comment",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentEncoding",
    "contentMediaType",
    "x-mcp-header",
];

/// Lowers `input_schema` (an object schema as `to_schema` accepted it) for `provider`.
pub fn lower_schema(provider: Provider, input_schema: &str) -> Result<LoweredSchema, Rejection> {
    if input_schema.len() > MAX_SCHEMA_BYTES {
        return Err(Rejection::new(
            RejectionKind::TooLarge,
            format!(
                "the schema is {} bytes, over the {MAX_SCHEMA_BYTES}-byte limit",
                input_schema.len()
            ),
        ));
    }
    let root: Value = serde_json::from_str(input_schema).map_err(|e| {
        Rejection::new(
            RejectionKind::InvalidJson,
            format!("the schema is not valid JSON: {e}"),
        )
    })?;
    if !root.is_object() {
        return Err(Rejection::new(
            RejectionKind::NotObjectSchema,
            "the schema is not a JSON object",
        ));
    }
    let mut cx = Lowering {
        root: &root,
        losses: Notes::with_cap(MAX_LOSSES),
        expanding: Vec::new(),
        nodes: 0,
    };
    let lowered = match provider {
        Provider::Generic => {
            return Ok(LoweredSchema {
                input_schema: input_schema.to_owned(),
                losses: Vec::new(),
            });
        }
        Provider::Anthropic => anthropic(&mut cx),
        Provider::OpenAiStrict => strict::lower(&mut cx)?,
        Provider::Gemini => gemini::lower(&mut cx)?,
    };
    Ok(LoweredSchema {
        input_schema: lowered.to_string(),
        losses: cx.losses.finish(),
    })
}

/// One lowering's state: the accepted schema (for `$ref`s), the report, and the bounds.
pub(crate) struct Lowering<'a> {
    root: &'a Value,
    losses: Notes,
    /// The `$ref`s being inlined, innermost last: one seen again is a cycle.
    expanding: Vec<String>,
    nodes: usize,
}

impl Lowering<'_> {
    fn lose(&mut self, path: &str, reason: impl Into<String>) {
        self.losses.add(path, reason);
    }

    /// Counts one produced node; `false` once the lowering has produced too many.
    fn room(&mut self, path: &str) -> bool {
        self.nodes += 1;
        if self.nodes == MAX_NODES + 1 {
            self.lose(
                path,
                format!(
                    "the lowered schema reached {MAX_NODES} subschemas; the rest allow any value"
                ),
            );
        }
        self.nodes <= MAX_NODES
    }

    /// The target of a local `$ref` to inline, or why it cannot be.
    fn target(&self, reference: &str) -> Result<&Value, &'static str> {
        if self.expanding.iter().any(|r| r == reference) {
            return Err("recursive $ref cut");
        }
        resolve(self.root, reference).ok_or("$ref does not resolve")
    }
}

/// `path` extended by one key, as a JSON pointer.
fn at(path: &str, key: &str) -> String {
    format!("{path}/{}", escape(key))
}

/// A constraint as the description states it: `format: email`.
fn said(key: &str, value: &Value) -> String {
    format!("{key}: {}", shown(value))
}

/// A value as a description quotes it: strings bare, anything else as JSON, short.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => clamp(s, MAX_SAID).0,
        other => clamp(&other.to_string(), MAX_SAID).0,
    }
}

/// Appends the constraints a provider could not carry to a schema's description.
fn tell(out: &mut Map<String, Value>, said: &[String]) {
    if said.is_empty() {
        return;
    }
    let mut text = match out.get("description") {
        Some(Value::String(d)) if !d.is_empty() => format!("{d} "),
        _ => String::new(),
    };
    text.push('(');
    text.push_str(&said.join("; "));
    text.push(')');
    let (text, _) = clamp(&text, 2 * MAX_SCHEMA_TEXT_BYTES);
    out.insert("description".into(), Value::String(text));
}

/// The schema's `title` and `description`, which every provider takes.
fn annotations(map: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for key in ["title", "description"] {
        if let Some(v @ Value::String(_)) = map.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    out
}

/// Whether the schema says what it is itself, beside any alternatives.
fn has_own(map: &Map<String, Value>) -> bool {
    ["type", "properties", "items", "enum", "const"]
        .iter()
        .any(|k| map.contains_key(*k))
}

/// The alternatives to lower in place of the schema: its `anyOf`, or its `oneOf`
/// (reported as weakened to `anyOf`). When they may not stand alone (`allowed` false:
/// beside the schema's own keywords, or at the top), they are dropped and reported.
fn alternatives<'m>(
    cx: &mut Lowering<'_>,
    map: &'m Map<String, Value>,
    path: &str,
    allowed: bool,
) -> Option<(&'static str, &'m [Value])> {
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = map.get(key) else {
            continue;
        };
        if !allowed {
            cx.lose(
                &at(path, key),
                "alternatives beside the schema's own keywords dropped",
            );
            continue;
        }
        if key == "oneOf" {
            cx.lose(
                &at(path, key),
                "oneOf became anyOf: exclusivity not enforced",
            );
        }
        return Some((key, branches));
    }
    None
}

/// The schema's `type` as a list of names and whether `null` is among them; when it
/// has none, what its keywords imply.
fn types(map: &Map<String, Value>) -> (Vec<String>, bool) {
    let mut names: Vec<String> = match map.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect(),
        _ => inferred(map),
    };
    let null = names.iter().any(|t| t == "null");
    names.retain(|t| t != "null");
    names.dedup();
    (names, null)
}

fn inferred(map: &Map<String, Value>) -> Vec<String> {
    let has = |keys: &[&str]| keys.iter().any(|k| map.contains_key(*k));
    if has(&[
        "properties",
        "additionalProperties",
        "patternProperties",
        "required",
    ]) {
        return vec!["object".into()];
    }
    if has(&[
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "uniqueItems",
    ]) {
        return vec!["array".into()];
    }
    if has(&["minLength", "maxLength", "pattern", "format"]) {
        return vec!["string".into()];
    }
    if has(&[
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    ]) {
        return vec!["number".into()];
    }
    let values: Vec<&Value> = match (map.get("enum"), map.get("const")) {
        (Some(Value::Array(vs)), _) => vs.iter().collect(),
        (_, Some(c)) => vec![c],
        _ => return Vec::new(),
    };
    let mut names = Vec::new();
    for v in values {
        let t = match v {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        if !names.iter().any(|n| n == t) {
            names.push(t.to_owned());
        }
    }
    names
}

/// `allOf` merged into the schema that holds it: properties joined, `required` united,
/// any other keyword taken from the first that has it (a conflict is reported).
fn merge_all_of<'m>(
    cx: &mut Lowering<'_>,
    map: &'m Map<String, Value>,
    path: &str,
) -> Cow<'m, Map<String, Value>> {
    let Some(Value::Array(branches)) = map.get("allOf") else {
        return Cow::Borrowed(map);
    };
    let mut out = map.clone();
    out.remove("allOf");
    for (i, branch) in branches.iter().enumerate() {
        let here = at(&at(path, "allOf"), &i.to_string());
        let branch = match branch {
            Value::Object(b) => match b.get("$ref").and_then(Value::as_str) {
                Some(r) => match cx.target(r) {
                    Ok(Value::Object(t)) => t.clone(),
                    _ => {
                        cx.lose(&here, "unresolvable $ref in allOf dropped");
                        continue;
                    }
                },
                None => b.clone(),
            },
            Value::Bool(true) => continue,
            _ => {
                cx.lose(&here, "a false allOf branch dropped");
                continue;
            }
        };
        for (key, value) in branch {
            match (key.as_str(), out.get_mut(&key)) {
                ("properties", Some(Value::Object(props))) => {
                    if let Value::Object(more) = value {
                        for (name, schema) in more {
                            if props.contains_key(&name) {
                                cx.lose(
                                    &at(&at(&here, "properties"), &name),
                                    "allOf: a second schema for this property dropped",
                                );
                            } else {
                                props.insert(name, schema);
                            }
                        }
                    }
                }
                ("required", Some(Value::Array(req))) => {
                    if let Value::Array(more) = value {
                        for r in more {
                            if !req.contains(&r) {
                                req.push(r);
                            }
                        }
                    }
                }
                (_, Some(existing)) => {
                    if *existing != value && !matches!(key.as_str(), "description" | "title") {
                        cx.lose(
                            &at(&here, &key),
                            "allOf: conflicts with an earlier value; dropped",
                        );
                    }
                }
                (_, None) => {
                    out.insert(key, value);
                }
            }
        }
    }
    Cow::Owned(out)
}

/// Anthropic takes JSON Schema as it is, except combinators at the top level: `allOf`
/// there is merged, and `anyOf`/`oneOf` alternatives are flattened into one object whose
/// required properties are those every alternative requires.
fn anthropic(cx: &mut Lowering<'_>) -> Value {
    let Value::Object(root) = cx.root else {
        return cx.root.clone();
    };
    let mut out = merge_all_of(cx, root, "").into_owned();
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = out.remove(key) else {
            continue;
        };
        cx.lose(
            &at("", key),
            "top-level alternatives flattened into one object: Anthropic refuses anyOf, oneOf and allOf there",
        );
        let mut common: Option<Vec<Value>> = None;
        for branch in &branches {
            let branch = match branch.get("$ref").and_then(Value::as_str) {
                Some(r) => cx.target(r).ok().cloned().unwrap_or(Value::Null),
                None => branch.clone(),
            };
            let Value::Object(b) = branch else {
                common = Some(Vec::new());
                continue;
            };
            if let Some(Value::Object(more)) = b.get("properties") {
                let props = out
                    .entry("properties")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(props) = props {
                    for (name, schema) in more {
                        props.entry(name.clone()).or_insert_with(|| schema.clone());
                    }
                }
            }
            let req: Vec<Value> = match b.get("required") {
                Some(Value::Array(r)) => r.clone(),
                _ => Vec::new(),
            };
            common = Some(match common {
                None => req,
                Some(c) => c.into_iter().filter(|r| req.contains(r)).collect(),
            });
        }
        if let Some(common) = common.filter(|c| !c.is_empty()) {
            let req = out
                .entry("required")
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(req) = req {
                for r in common {
                    if !req.contains(&r) {
                        req.push(r);
                    }
                }
            }
        }
    }
    out.insert("type".into(), Value::String("object".into()));
    Value::Object(out)
}

#[cfg(test)]
mod tests;
