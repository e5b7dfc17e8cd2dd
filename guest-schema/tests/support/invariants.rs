//! What the reference guard promises about its own output, as checks that panic with
//! the offending input. Shared by `tests/invariants.rs` (the real corpus, every `cargo
//! test`) and the fuzz targets in `fuzz/` (arbitrary input).

use guest_schema::{
    ContentBlock, Finding, MAX_FINDINGS, Provider, lower_schema, scan_text, scan_tool, to_prompt,
    to_resource, to_resource_template, to_result, to_schema, tool_name,
};
use serde_json::{Value, json};

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("the guard wrote bad JSON ({e}): {text}"))
}

/// One tool definition through everything the guard does to a tool. What `to_schema`
/// accepts is a fixpoint: the tool rebuilt from it is accepted again unchanged with
/// nothing more dropped (else the first pass let through something the guard itself
/// does not trust); each JSON Schema lowering is a fixpoint too, and Gemini's (OpenAPI's
/// dialect, which is not lowered again) keeps its module's rules. Each finding on an
/// accepted tool lies on characters of the string its path names, as the host checks.
pub fn tool(text: &str) {
    let findings = scan_tool("s", text);
    assert!(findings.len() <= MAX_FINDINGS + 1);
    let Ok(first) = to_schema("s", text) else {
        return;
    };
    // The host judges the findings of an accepted tool only, and checks them as
    // `host/src/guard/findings.rs` does: the span lies in the string value the path
    // names, or in the key that is its last segment.
    let json = parse(text);
    for f in &findings {
        let value = match json.pointer(&f.path) {
            Some(Value::String(s)) => Some(s.as_str()),
            Some(_) if !f.path.is_empty() => None,
            _ => panic!("{f:?} names no string in {text}"),
        };
        let key = f.path.rsplit('/').next().unwrap_or_default();
        let key = (!f.path.is_empty()).then(|| key.replace("~1", "/").replace("~0", "~"));
        assert!(
            value.is_some_and(|v| fits(f, v)) || key.is_some_and(|k| fits(f, &k)),
            "{f:?} lies on no characters of its value or key, in {text}"
        );
    }
    let input = parse(&first.input_schema);
    assert_eq!(
        input["type"], "object",
        "accepted a non-object schema: {text}"
    );
    let mut again = json!({
        "name": first.name,
        "description": first.description,
        "inputSchema": input,
    });
    if let Some(output) = &first.output_schema {
        again["outputSchema"] = parse(output);
    }
    let again_text = again.to_string();
    let second = match to_schema("s", &again_text) {
        Ok(second) => second,
        Err(e) => panic!("the guard refused its own output: {e:?}\n{again_text}"),
    };
    // Key order may move; the schema may not.
    assert_eq!(
        input,
        parse(&second.input_schema),
        "the input schema moved on a second pass: {text}"
    );
    assert_eq!(
        first.output_schema.as_deref().map(parse),
        second.output_schema.as_deref().map(parse),
        "the output schema moved on a second pass: {text}"
    );
    assert!(
        second.dropped.is_empty(),
        "a second pass dropped more: {:?}\n{again_text}",
        second.dropped
    );
    for provider in [
        Provider::Generic,
        Provider::Anthropic,
        Provider::OpenAiStrict,
        Provider::Gemini,
    ] {
        let Ok(lowered) = lower_schema(provider, &first.input_schema) else {
            continue;
        };
        let schema = parse(&lowered.input_schema);
        assert_eq!(
            schema["type"], "object",
            "{provider:?} lowered {text} to a non-object schema"
        );
        if provider == Provider::Gemini {
            gemini(&schema, true);
            continue;
        }
        if provider == Provider::OpenAiStrict {
            strict(&schema);
        }
        let relowered = match lower_schema(provider, &lowered.input_schema) {
            Ok(l) => l,
            Err(e) => panic!(
                "{provider:?} refused its own lowering: {e:?}\n{}",
                lowered.input_schema
            ),
        };
        assert_eq!(
            schema,
            parse(&relowered.input_schema),
            "{provider:?}'s lowering moved on a second pass: {text}"
        );
    }
}

/// One `tools/call` result through the guard's conversion and its findings scan.
pub fn result(text: &str) {
    let findings = scan_text(text);
    assert!(findings.len() <= MAX_FINDINGS + 1);
    for f in &findings {
        assert!(f.path.is_empty(), "{f:?}");
        assert!(fits(f, text), "{f:?} lies on no characters of {text}");
    }
    let Ok(output) = to_result(text) else {
        return;
    };
    assert!(output.blocks.len() <= guest_schema::limits::MAX_BLOCKS);
    for block in &output.blocks {
        if let ContentBlock::Text(t) = block {
            assert!(scan_text(t).len() <= MAX_FINDINGS + 1);
        }
    }
}

/// A prompt, resource or template, and (split at the first newline) a server and tool
/// name pair. A model-visible name is always `[A-Za-z0-9_-]{1,64}`.
pub fn context(text: &str) {
    let _ = to_prompt("s", text);
    let _ = to_resource("s", text);
    let _ = to_resource_template("s", text);
    let (server, tool) = text.split_once('\n').unwrap_or(("s", text));
    if let Ok(name) = tool_name(server, tool) {
        assert!(
            !name.is_empty()
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-'),
            "bad name {name:?} for {server:?} / {tool:?}"
        );
    }
}

/// Whether a finding's span lies on characters of `target`.
fn fits(f: &Finding, target: &str) -> bool {
    let (start, end) = (f.start as usize, f.end as usize);
    start < end
        && end <= target.len()
        && target.is_char_boundary(start)
        && target.is_char_boundary(end)
}

/// The subschemas directly below `schema`.
fn children(schema: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(m)) = schema.get(key) {
            out.extend(m.values());
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(a)) = schema.get(key) {
            out.extend(a.iter());
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(v @ Value::Object(_)) = schema.get(key) {
            out.push(v);
        }
    }
    out
}

/// `lower/gemini.rs`'s rules: one `type` per schema, `enum` on strings only, none of
/// the keywords it drops, every array with `items`, every object below the top with a
/// property.
fn gemini(schema: &Value, top: bool) {
    for key in [
        "$ref",
        "additionalProperties",
        "oneOf",
        "allOf",
        "not",
        "const",
        "exclusiveMinimum",
        "exclusiveMaximum",
    ] {
        assert!(schema.get(key).is_none(), "Gemini kept {key}: {schema}");
    }
    let ty = schema.get("type");
    if let Some(ty) = ty {
        assert!(
            ty.is_string(),
            "Gemini kept a type that is not one string: {schema}"
        );
    }
    if schema.get("enum").is_some() {
        assert_eq!(
            ty.and_then(Value::as_str),
            Some("string"),
            "Gemini kept a non-string enum: {schema}"
        );
    }
    match ty.and_then(Value::as_str) {
        Some("array") => assert!(
            schema.get("items").is_some(),
            "a Gemini array without items: {schema}"
        ),
        Some("object") if !top => assert!(
            schema
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| !p.is_empty()),
            "a Gemini object below the top without properties: {schema}"
        ),
        _ => {}
    }
    for child in children(schema) {
        gemini(child, false);
    }
}

/// `lower/strict.rs`'s rules: every object closed and requiring all its properties, and
/// no combinator but `anyOf`.
fn strict(schema: &Value) {
    for key in ["oneOf", "allOf", "not"] {
        assert!(schema.get(key).is_none(), "strict kept {key}: {schema}");
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        assert_eq!(
            schema["additionalProperties"], false,
            "a strict object left open: {schema}"
        );
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for name in props.keys() {
            assert!(
                required.contains(&name.as_str()),
                "strict left {name} optional: {schema}"
            );
        }
    }
    for child in children(schema) {
        strict(child);
    }
}
