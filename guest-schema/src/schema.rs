//! `to_schema`: accepts one tool object from `tools/list` and reduces its schemas to
//! the JSON Schema 2020-12 subset the host validates arguments with.
//!
//! The policy is "keep what validates, drop what cannot be trusted, say what was
//! dropped": vendor and unknown keywords, `$schema`/`$id` (which would change how the
//! rest is read), remote `$ref` (never fetched), unresolvable local `$ref`, subschemas
//! nested past a depth bound and oversized enums all go, each with a reason.

use serde_json::{Map, Value};

use crate::limits::{
    MAX_DESCRIPTION_BYTES, MAX_ENUM_VALUES, MAX_PATTERN_BYTES, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_TEXT_BYTES, MAX_TITLE_BYTES, MAX_TOOL_JSON_BYTES,
};
use crate::text::{clamp, quote};
use crate::types::{AcceptedTool, Dropped, Hints, Rejection, RejectionKind};

/// At most this many drop notes per tool; the rest are counted in one last note.
/// The JSON Schema dialect every schema is read as.
const DIALECT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";
const MAX_NOTES: usize = 64;
/// Longest JSON pointer kept in a note.
const MAX_NOTE_PATH: usize = 200;

const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "string", "integer",
];

/// Accepts one tool object (name, title, description, inputSchema, outputSchema,
/// annotations) given as JSON text.
pub fn to_schema(_server: &str, tool_json: &str) -> Result<AcceptedTool, Rejection> {
    if tool_json.len() > MAX_TOOL_JSON_BYTES {
        return Err(Rejection::new(
            RejectionKind::TooLarge,
            format!(
                "the tool definition is {} bytes, over the {MAX_TOOL_JSON_BYTES}-byte limit",
                tool_json.len()
            ),
        ));
    }
    let tool: Value = crate::json::parse(tool_json).map_err(|e| {
        Rejection::new(
            RejectionKind::InvalidJson,
            format!("the tool is not valid JSON: {e}"),
        )
    })?;
    let Value::Object(mut tool) = tool else {
        return Err(Rejection::new(
            RejectionKind::InvalidJson,
            "the tool is not a JSON object",
        ));
    };
    let name = match tool.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            return Err(Rejection::new(
                RejectionKind::InvalidName,
                "the tool has no name",
            ));
        }
    };

    let mut notes = Notes::default();
    let description = match tool.get("description") {
        Some(Value::String(s)) => {
            let (d, cut) = clamp(s, MAX_DESCRIPTION_BYTES);
            if cut {
                notes.add(
                    "/description",
                    format!("clamped to {MAX_DESCRIPTION_BYTES} bytes"),
                );
            }
            d
        }
        None | Some(Value::Null) => String::new(),
        Some(_) => {
            notes.add("/description", "not a string");
            String::new()
        }
    };

    let input = match tool.remove("inputSchema") {
        None | Some(Value::Null) => {
            notes.add("/inputSchema", "missing; an empty object schema is assumed");
            Map::new()
        }
        Some(Value::Object(o)) => o,
        Some(other) => {
            return Err(Rejection::new(
                RejectionKind::NotObjectSchema,
                format!(
                    "inputSchema is a JSON {}, not an object schema",
                    kind_of(&other)
                ),
            ));
        }
    };
    let input = top_level_object(input, "/inputSchema", &mut notes).map_err(|message| {
        Rejection::new(
            RejectionKind::NotObjectSchema,
            format!("inputSchema {message}"),
        )
    })?;
    let input_schema = clean_root(input, "/inputSchema", &mut notes, true)
        .map_err(|why| Rejection::new(RejectionKind::NotObjectSchema, why))?;
    let input_schema = serde_json::to_string(&input_schema).map_err(|e| {
        Rejection::new(
            RejectionKind::Other,
            format!("cannot encode the schema: {e}"),
        )
    })?;
    if input_schema.len() > MAX_SCHEMA_BYTES {
        return Err(Rejection::new(
            RejectionKind::TooLarge,
            format!(
                "the cleaned input schema is {} bytes, over the {MAX_SCHEMA_BYTES}-byte limit",
                input_schema.len()
            ),
        ));
    }

    let output_schema = match tool.remove("outputSchema") {
        None | Some(Value::Null) => None,
        Some(Value::Object(o)) => match top_level_object(o, "/outputSchema", &mut notes) {
            Ok(o) => {
                // `x-mcp-header` means something only in an input schema.
                let cleaned = clean_root(o, "/outputSchema", &mut notes, false).unwrap_or_default();
                match serde_json::to_string(&cleaned) {
                    Ok(s) if s.len() <= MAX_SCHEMA_BYTES => Some(s),
                    _ => {
                        notes.add("/outputSchema", "too large; dropped");
                        None
                    }
                }
            }
            Err(message) => {
                notes.add("/outputSchema", format!("{message}; dropped"));
                None
            }
        },
        Some(other) => {
            notes.add(
                "/outputSchema",
                format!("a JSON {}, not a schema; dropped", kind_of(&other)),
            );
            None
        }
    };

    let hints = hints(&tool, &mut notes);
    Ok(AcceptedTool {
        name,
        description,
        input_schema,
        output_schema,
        hints,
        dropped: notes.finish(),
    })
}

/// Checks that a schema's top level is an object schema, filling in a missing `type`.
fn top_level_object(
    mut schema: Map<String, Value>,
    path: &str,
    notes: &mut Notes,
) -> Result<Map<String, Value>, String> {
    match schema.get("type") {
        None => {
            notes.add(&format!("{path}/type"), "missing; \"object\" assumed");
            schema.insert("type".into(), Value::String("object".into()));
        }
        Some(Value::String(t)) if t == "object" => {}
        Some(Value::Array(ts)) if ts.iter().any(|t| t == "object") => {
            notes.add(&format!("{path}/type"), "narrowed to \"object\"");
            schema.insert("type".into(), Value::String("object".into()));
        }
        Some(other) => {
            return Err(format!(
                "has top-level type {}, not \"object\"",
                quote(&other.to_string(), 40)
            ));
        }
    }
    Ok(schema)
}

/// A 2020-12 `$anchor`: a letter or `_`, then letters, digits, `-`, `_` and `.` (at most
/// 128 bytes).
fn plain_name(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= 128
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// Cleans a whole schema, then drops local `$ref`s that do not resolve in the result.
/// With `headers`, `x-mcp-header` annotations are kept where the specification allows
/// them, and any other makes the whole schema invalid (the error says why).
fn clean_root(
    schema: Map<String, Value>,
    path: &str,
    notes: &mut Notes,
    headers: bool,
) -> Result<Value, String> {
    let mut cleaner = Cleaner {
        notes,
        refs: Vec::new(),
        headers: headers.then(Vec::new),
        bad_header: None,
    };
    let mut root = cleaner.object(schema, &mut Pointer::new(path), 0);
    let refs = std::mem::take(&mut cleaner.refs);
    for (at, target) in refs {
        if resolve(&root, &target).is_none() {
            if let Some(Value::Object(o)) = get_mut(&mut root, &at) {
                o.remove("$ref");
            }
            let shown = at
                .iter()
                .fold(path.to_owned(), |p, s| format!("{p}/{}", escape(s)));
            cleaner.notes.add(
                &format!("{shown}/$ref"),
                "local $ref does not resolve; dropped",
            );
        }
    }
    match cleaner.bad_header {
        Some(why) => Err(why),
        None => Ok(root),
    }
}

struct Cleaner<'a> {
    notes: &'a mut Notes,
    /// Kept local `$ref`s: where they are (segments below the root) and what they name.
    refs: Vec<(Vec<String>, String)>,
    /// In an input schema: the `x-mcp-header` names kept so far, lowercased.
    headers: Option<Vec<String>>,
    /// The first `x-mcp-header` the specification forbids.
    bad_header: Option<String>,
}

/// Most bytes of an `x-mcp-header` name.
const MAX_HEADER_NAME: usize = 64;

impl Cleaner<'_> {
    /// Checks an `x-mcp-header` (MCP 2026-07-28, Streamable HTTP, Custom Headers): a
    /// token name, unique ignoring case, on a string, integer or boolean property reached
    /// from the root through `properties` alone.
    fn header(&mut self, value: &Value, ty: Option<&Value>, ptr: &Pointer) -> Result<(), String> {
        let at = ptr.at("x-mcp-header");
        let Value::String(name) = value else {
            return Err(format!("{at} is not a string"));
        };
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || name.len() > MAX_HEADER_NAME || !name.bytes().all(token) {
            return Err(format!("{at} is not an HTTP header name"));
        }
        let s = &ptr.segments;
        let reachable = !s.is_empty()
            && s.len().is_multiple_of(2)
            && s.iter().step_by(2).all(|k| k == "properties");
        if !reachable {
            return Err(format!(
                "{at} is not on a property reached through properties alone"
            ));
        }
        let primitive = |t: &str| matches!(t, "string" | "integer" | "boolean");
        let ok_type = match ty {
            Some(Value::String(t)) => primitive(t),
            Some(Value::Array(ts)) => {
                let named: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
                named.iter().filter(|t| **t != "null").count() == 1
                    && named.iter().all(|t| *t == "null" || primitive(t))
            }
            _ => false,
        };
        if !ok_type {
            return Err(format!(
                "{at} is on a property that is not a string, integer or boolean"
            ));
        }
        let seen = self.headers.get_or_insert_with(Vec::new);
        let lower = name.to_ascii_lowercase();
        if seen.contains(&lower) {
            return Err(format!("{at} repeats the header name {name}"));
        }
        seen.push(lower);
        Ok(())
    }
}

/// A JSON pointer being built during the walk: the display prefix plus the segments.
struct Pointer {
    prefix: String,
    segments: Vec<String>,
}

impl Pointer {
    fn new(prefix: &str) -> Pointer {
        Pointer {
            prefix: prefix.to_owned(),
            segments: Vec::new(),
        }
    }

    fn at(&self, key: &str) -> String {
        let mut s = self.prefix.clone();
        for seg in &self.segments {
            s.push('/');
            s.push_str(&escape(seg));
        }
        s.push('/');
        s.push_str(&escape(key));
        s
    }
}

impl Cleaner<'_> {
    /// Cleans a value in schema position: an object schema or a boolean schema.
    fn schema(&mut self, value: Value, ptr: &mut Pointer, key: &str, depth: usize) -> Value {
        match value {
            Value::Bool(b) => Value::Bool(b),
            Value::Object(o) => {
                ptr.segments.push(key.to_owned());
                let v = self.object(o, ptr, depth);
                ptr.segments.pop();
                v
            }
            other => {
                self.notes.add(
                    &ptr.at(key),
                    format!(
                        "a JSON {} is not a schema; allows anything",
                        kind_of(&other)
                    ),
                );
                Value::Bool(true)
            }
        }
    }

    fn object(&mut self, schema: Map<String, Value>, ptr: &mut Pointer, depth: usize) -> Value {
        if depth >= MAX_SCHEMA_DEPTH {
            let at = ptr.at("");
            self.notes.add(
                at.trim_end_matches('/'),
                format!("nested deeper than {MAX_SCHEMA_DEPTH} levels; not validated"),
            );
            return Value::Object(Map::new());
        }
        let mut out = Map::with_capacity(schema.len());
        let mut exclusive_bools: Vec<(&str, bool)> = Vec::new();
        let ty = schema.get("type").cloned();
        for (key, value) in schema {
            let kept = match key.as_str() {
                "x-mcp-header" if self.headers.is_some() => {
                    match self.header(&value, ty.as_ref(), ptr) {
                        Ok(()) => Some(value),
                        Err(why) => {
                            self.bad_header.get_or_insert(why);
                            continue;
                        }
                    }
                }
                "type" => valid_type(&value).then_some(value),
                "properties" | "patternProperties" | "$defs" | "definitions"
                | "dependentSchemas" => self.schema_map(&key, value, ptr, depth),
                "items" => match value {
                    Value::Array(items) => {
                        self.notes
                            .add(&ptr.at("items"), "tuple form kept as prefixItems");
                        if let Some(v) =
                            self.schema_list("prefixItems", Value::Array(items), ptr, depth)
                        {
                            out.insert("prefixItems".into(), v);
                        }
                        continue;
                    }
                    v => Some(self.schema(v, ptr, &key, depth + 1)),
                },
                "additionalProperties"
                | "not"
                | "if"
                | "then"
                | "else"
                | "contains"
                | "propertyNames"
                | "unevaluatedProperties"
                | "unevaluatedItems" => Some(self.schema(value, ptr, &key, depth + 1)),
                "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                    self.schema_list(&key, value, ptr, depth)
                }
                "required" => required(value),
                "enum" => match value {
                    Value::Array(a) if a.len() > MAX_ENUM_VALUES => {
                        self.notes.add(
                            &ptr.at("enum"),
                            format!(
                                "{} values, over the {MAX_ENUM_VALUES}-value limit; dropped",
                                a.len()
                            ),
                        );
                        continue;
                    }
                    Value::Array(a) if !a.is_empty() => Some(Value::Array(a)),
                    _ => None,
                },
                "const" | "default" => Some(value),
                "examples" => value.is_array().then_some(value),
                "minimum" | "maximum" => value.is_number().then_some(value),
                "exclusiveMinimum" | "exclusiveMaximum" => match value {
                    Value::Bool(b) => {
                        let which = if key == "exclusiveMinimum" {
                            "minimum"
                        } else {
                            "maximum"
                        };
                        exclusive_bools.push((which, b));
                        continue;
                    }
                    v => v.is_number().then_some(v),
                },
                "multipleOf" => value.as_f64().is_some_and(|n| n > 0.0).then_some(value),
                "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties"
                | "maxProperties" | "minContains" | "maxContains" => {
                    value.is_u64().then_some(value)
                }
                "uniqueItems" | "readOnly" | "writeOnly" | "deprecated" => {
                    value.is_boolean().then_some(value)
                }
                "pattern" => match value {
                    Value::String(p) if p.len() > MAX_PATTERN_BYTES => {
                        self.notes
                            .add(&ptr.at("pattern"), "longer than the pattern limit; dropped");
                        continue;
                    }
                    v => v.is_string().then_some(v),
                },
                "format" | "contentEncoding" | "contentMediaType" => {
                    value.is_string().then_some(value)
                }
                "description" | "title" => match value {
                    Value::String(s) => {
                        let (s, cut) = clamp(&s, MAX_SCHEMA_TEXT_BYTES);
                        if cut {
                            self.notes.add(
                                &ptr.at(&key),
                                format!("clamped to {MAX_SCHEMA_TEXT_BYTES} bytes"),
                            );
                        }
                        Some(Value::String(s))
                    }
                    _ => None,
                },
                "dependentRequired" => dependent_required(value),
                "$ref" => match value {
                    Value::String(r) if r.starts_with('#') => {
                        self.refs.push((ptr.segments.clone(), r.clone()));
                        Some(Value::String(r))
                    }
                    Value::String(_) => {
                        self.notes
                            .add(&ptr.at("$ref"), "remote $ref refused (never fetched)");
                        continue;
                    }
                    _ => None,
                },
                // The dialect it is read as, at the root: kept, so a client and a model see
                // what the server declared (MCP 2026-07-28, SEP-2106). Any other dialect
                // is read as 2020-12 and not claimed.
                "$schema" if ptr.segments.is_empty() && value == DIALECT_2020_12 => Some(value),
                // A plain-name anchor annotates its subschema (SEP-2106); a `$ref` to it is
                // not a JSON pointer, so such a `$ref` does not resolve and is dropped.
                "$anchor" if value.as_str().is_some_and(plain_name) => Some(value),
                "$schema" | "$id" | "id" | "$anchor" | "$dynamicRef" | "$dynamicAnchor"
                | "$recursiveRef" | "$recursiveAnchor" | "$vocabulary" | "$comment" => {
                    self.notes.add(
                        &ptr.at(&key),
                        "read as JSON Schema 2020-12 without it; dropped",
                    );
                    continue;
                }
                k if k.starts_with("x-") => {
                    self.notes.add(&ptr.at(&key), "vendor keyword; dropped");
                    continue;
                }
                _ => {
                    self.notes.add(&ptr.at(&key), "unknown keyword; dropped");
                    continue;
                }
            };
            match kept {
                Some(v) => {
                    out.insert(key, v);
                }
                None => self.notes.add(&ptr.at(&key), "malformed value; dropped"),
            }
        }
        // Draft-04 wrote `exclusiveMinimum: true` beside `minimum`; 2020-12 wants the bound itself.
        for (bound, exclusive) in exclusive_bools {
            let key = if bound == "minimum" {
                "exclusiveMinimum"
            } else {
                "exclusiveMaximum"
            };
            match (exclusive, out.get(bound).filter(|v| v.is_number()).cloned()) {
                (true, Some(v)) => {
                    out.remove(bound);
                    out.insert(key.into(), v);
                    self.notes
                        .add(&ptr.at(key), "draft-04 boolean form rewritten as a number");
                }
                _ => self.notes.add(
                    &ptr.at(key),
                    "draft-04 boolean form without a bound; dropped",
                ),
            }
        }
        Value::Object(out)
    }

    /// Cleans a keyword whose value maps names to schemas (`properties`, `$defs`, ...).
    fn schema_map(
        &mut self,
        key: &str,
        value: Value,
        ptr: &mut Pointer,
        depth: usize,
    ) -> Option<Value> {
        let Value::Object(map) = value else {
            return None;
        };
        ptr.segments.push(key.to_owned());
        let mut out = Map::with_capacity(map.len());
        for (name, sub) in map {
            if key == "patternProperties" && name.len() > MAX_PATTERN_BYTES {
                self.notes
                    .add(&ptr.at(&name), "pattern longer than the limit; dropped");
                continue;
            }
            let cleaned = self.schema(sub, ptr, &name, depth + 1);
            out.insert(name, cleaned);
        }
        ptr.segments.pop();
        Some(Value::Object(out))
    }

    /// Cleans a keyword whose value is a non-empty list of schemas (`anyOf`, ...).
    fn schema_list(
        &mut self,
        key: &str,
        value: Value,
        ptr: &mut Pointer,
        depth: usize,
    ) -> Option<Value> {
        let Value::Array(list) = value else {
            return None;
        };
        if list.is_empty() {
            return None;
        }
        ptr.segments.push(key.to_owned());
        let out = list
            .into_iter()
            .enumerate()
            .map(|(i, sub)| self.schema(sub, ptr, &i.to_string(), depth + 1))
            .collect();
        ptr.segments.pop();
        Some(Value::Array(out))
    }
}

fn valid_type(value: &Value) -> bool {
    let known = |t: &Value| t.as_str().is_some_and(|t| TYPES.contains(&t));
    match value {
        Value::String(_) => known(value),
        Value::Array(ts) => {
            !ts.is_empty()
                && ts.iter().all(known)
                && ts.iter().enumerate().all(|(i, t)| !ts[..i].contains(t))
        }
        _ => false,
    }
}

/// `required` as a list of unique strings (2020-12 refuses duplicates).
fn required(value: Value) -> Option<Value> {
    let Value::Array(names) = value else {
        return None;
    };
    let mut out: Vec<Value> = Vec::with_capacity(names.len());
    for n in names {
        if !n.is_string() {
            return None;
        }
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Some(Value::Array(out))
}

fn dependent_required(value: Value) -> Option<Value> {
    let Value::Object(map) = value else {
        return None;
    };
    let mut out = Map::with_capacity(map.len());
    for (k, v) in map {
        out.insert(k, required(v)?);
    }
    Some(Value::Object(out))
}

fn hints(tool: &Map<String, Value>, notes: &mut Notes) -> Hints {
    let annotations = tool.get("annotations").and_then(Value::as_object);
    let flag = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .and_then(Value::as_bool)
    };
    let title = tool
        .get("title")
        .and_then(Value::as_str)
        .or_else(|| {
            annotations
                .and_then(|a| a.get("title"))
                .and_then(Value::as_str)
        })
        .map(|t| {
            let (t, cut) = clamp(t, MAX_TITLE_BYTES);
            if cut {
                notes.add("/title", format!("clamped to {MAX_TITLE_BYTES} bytes"));
            }
            t
        });
    Hints {
        title,
        read_only: flag("readOnlyHint"),
        destructive: flag("destructiveHint"),
        idempotent: flag("idempotentHint"),
        open_world: flag("openWorldHint"),
    }
}

/// Resolves a local `$ref` (`#`, `#/a/b`, percent-encoded or not) against `root`.
pub(crate) fn resolve<'v>(root: &'v Value, reference: &str) -> Option<&'v Value> {
    let fragment = reference.strip_prefix('#')?;
    if fragment.is_empty() {
        return Some(root);
    }
    let fragment = percent_decode(fragment)?;
    let pointer = fragment.strip_prefix('/')?;
    let mut at = root;
    for seg in pointer.split('/') {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        at = match at {
            Value::Object(o) => o.get(&seg)?,
            Value::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}

fn get_mut<'v>(root: &'v mut Value, segments: &[String]) -> Option<&'v mut Value> {
    let mut at = root;
    for seg in segments {
        at = match at {
            Value::Object(o) => o.get_mut(seg)?,
            Value::Array(a) => a.get_mut(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}

fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

pub(crate) fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The drop notes of one tool, bounded in number and size.
pub(crate) struct Notes {
    list: Vec<Dropped>,
    overflow: usize,
    cap: usize,
}

impl Default for Notes {
    fn default() -> Notes {
        Notes::with_cap(MAX_NOTES)
    }
}

impl Notes {
    /// Notes keeping at most `cap` entries (and a count of the rest).
    pub(crate) fn with_cap(cap: usize) -> Notes {
        Notes {
            list: Vec::new(),
            overflow: 0,
            cap,
        }
    }

    pub(crate) fn add(&mut self, path: &str, reason: impl Into<String>) {
        if self.list.len() >= self.cap {
            self.overflow += 1;
            return;
        }
        let (path, _) = clamp(path, MAX_NOTE_PATH);
        self.list.push(Dropped {
            path,
            reason: reason.into(),
        });
    }

    pub(crate) fn finish(mut self) -> Vec<Dropped> {
        if self.overflow > 0 {
            self.list.push(Dropped {
                path: String::new(),
                reason: format!("{} more changes not listed", self.overflow),
            });
        }
        self.list
    }
}

#[cfg(test)]
mod tests;
