use serde_json::{Value, json};

use super::*;

fn accept(tool: Value) -> (Value, AcceptedTool) {
    let t = to_schema("srv", &tool.to_string()).unwrap_or_else(|r| panic!("{r:?}"));
    let schema: Value = serde_json::from_str(&t.input_schema).unwrap_or_else(|e| panic!("{e}"));
    (schema, t)
}

fn reasons(t: &AcceptedTool) -> Vec<String> {
    t.dropped
        .iter()
        .map(|d| format!("{} {}", d.path, d.reason))
        .collect()
}

fn reject(tool: &str) -> RejectionKind {
    match to_schema("srv", tool) {
        Ok(t) => panic!("accepted {t:?}"),
        Err(r) => r.kind,
    }
}

#[test]
fn keeps_a_plain_schema_unchanged() {
    let schema = json!({
        "type": "object",
        "properties": {"path": {"type": "string", "description": "file"}, "n": {"type": "integer", "minimum": 0}},
        "required": ["path"],
        "additionalProperties": false
    });
    let (out, t) =
        accept(json!({"name": "read", "description": "Read a file", "inputSchema": schema}));
    assert_eq!(out, schema);
    assert!(t.dropped.is_empty(), "{:?}", t.dropped);
    assert_eq!(t.description, "Read a file");
}

#[test]
fn a_root_2020_12_dialect_is_kept_and_any_other_dropped() {
    let dialect = "https://json-schema.org/draft/2020-12/schema";
    let (out, _) = accept(json!({"name": "t", "inputSchema": {
        "$schema": dialect, "type": "object",
        "properties": {"a": {"$schema": dialect, "type": "string"}}
    }}));
    assert_eq!(
        out,
        json!({"$schema": dialect, "type": "object", "properties": {"a": {"type": "string"}}})
    );
}

#[test]
fn a_plain_name_anchor_is_kept_and_any_other_dropped() {
    let (out, t) = accept(json!({"name": "t", "inputSchema": {
        "type": "object",
        "$defs": {"a": {"$anchor": "addressDef", "type": "string"},
                  "b": {"$anchor": "#not a name", "type": "string"},
                  "c": {"$anchor": 7, "type": "string"}},
        "properties": {"x": {"$ref": "#addressDef"}, "y": {"$ref": "#/$defs/a"}}
    }}));
    assert_eq!(
        out,
        json!({"type": "object",
               "$defs": {"a": {"$anchor": "addressDef", "type": "string"},
                         "b": {"type": "string"}, "c": {"type": "string"}},
               "properties": {"x": {}, "y": {"$ref": "#/$defs/a"}}})
    );
    let r = reasons(&t);
    assert!(
        r.iter()
            .any(|r| r.starts_with("/inputSchema/properties/x/$ref ")),
        "a $ref to an anchor is not followed: {r:?}"
    );
}

#[test]
fn drops_vendor_and_meta_keywords_with_reasons() {
    let (out, t) = accept(json!({"name": "t", "inputSchema": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "x-google-hint": 1,
        "properties": {"a": {"type": "string", "nullable": true, "format": "uri"}}
    }}));
    assert_eq!(
        out,
        json!({"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}})
    );
    let r = reasons(&t);
    assert!(
        r.iter().any(|r| r.starts_with("/inputSchema/$schema ")),
        "{r:?}"
    );
    assert!(
        r.iter()
            .any(|r| r == "/inputSchema/x-google-hint vendor keyword; dropped"),
        "{r:?}"
    );
    assert!(
        r.iter()
            .any(|r| r == "/inputSchema/properties/a/nullable unknown keyword; dropped"),
        "{r:?}"
    );
}

#[test]
fn refuses_remote_refs_and_keeps_local_ones() {
    let (out, t) = accept(json!({"name": "t", "inputSchema": {
        "type": "object",
        "$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
        "properties": {
            "tree": {"$ref": "#/$defs/node"},
            "far": {"$ref": "http://evil.example/schema.json"},
            "gone": {"$ref": "#/$defs/missing"}
        }
    }}));
    assert_eq!(out["properties"]["tree"], json!({"$ref": "#/$defs/node"}));
    assert_eq!(out["properties"]["far"], json!({}));
    assert_eq!(out["properties"]["gone"], json!({}));
    let r = reasons(&t);
    assert!(
        r.contains(
            &"/inputSchema/properties/far/$ref remote $ref refused (never fetched)".to_owned()
        ),
        "{r:?}"
    );
    assert!(
        r.contains(
            &"/inputSchema/properties/gone/$ref local $ref does not resolve; dropped".to_owned()
        ),
        "{r:?}"
    );
}

#[test]
fn top_level_must_be_an_object_schema() {
    assert_eq!(
        reject(r#"{"name":"t","inputSchema":{"type":"string"}}"#),
        RejectionKind::NotObjectSchema
    );
    assert_eq!(
        reject(r#"{"name":"t","inputSchema":[1,2]}"#),
        RejectionKind::NotObjectSchema
    );
    assert_eq!(
        reject(r#"{"name":"t","inputSchema":true}"#),
        RejectionKind::NotObjectSchema
    );
    let (out, t) = accept(json!({"name": "t", "inputSchema": {"properties": {}}}));
    assert_eq!(out["type"], "object");
    assert_eq!(
        reasons(&t),
        ["/inputSchema/type missing; \"object\" assumed"]
    );
    let (out, _) = accept(json!({"name": "t"}));
    assert_eq!(out, json!({"type": "object"}));
}

#[test]
fn bad_json_and_bad_names_are_rejected() {
    assert_eq!(reject("not json"), RejectionKind::InvalidJson);
    assert_eq!(reject("[]"), RejectionKind::InvalidJson);
    assert_eq!(reject(r#"{"inputSchema":{}}"#), RejectionKind::InvalidName);
    assert_eq!(
        reject(r#"{"name":"","inputSchema":{}}"#),
        RejectionKind::InvalidName
    );
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    assert_eq!(
        reject(&format!(r#"{{"name":"t","inputSchema":{deep}}}"#)),
        RejectionKind::InvalidJson
    );
    let huge = format!(
        r#"{{"name":"t","description":"{}"}}"#,
        "x".repeat(MAX_TOOL_JSON_BYTES)
    );
    assert_eq!(reject(&huge), RejectionKind::TooLarge);
}

#[test]
fn deep_nesting_within_json_limits_is_cut_at_the_depth_bound() {
    let mut schema = json!({"type": "string"});
    for _ in 0..60 {
        schema = json!({"type": "object", "properties": {"x": schema}});
    }
    let (out, t) = accept(json!({"name": "t", "inputSchema": schema}));
    let mut depth = 0;
    let mut at = &out;
    while let Some(next) = at.get("properties").and_then(|p| p.get("x")) {
        at = next;
        depth += 1;
    }
    assert!(depth <= MAX_SCHEMA_DEPTH, "{depth}");
    assert!(reasons(&t).iter().any(|r| r.contains("nested deeper than")));
}

#[test]
fn huge_enums_are_dropped_and_small_ones_kept() {
    let big: Vec<u32> = (0..5000).collect();
    let (out, t) = accept(
        json!({"name": "t", "inputSchema": {"type": "object", "properties": {
            "a": {"enum": big}, "b": {"enum": ["x", "y"]}
        }}}),
    );
    assert_eq!(out["properties"]["a"], json!({}));
    assert_eq!(out["properties"]["b"], json!({"enum": ["x", "y"]}));
    assert!(reasons(&t)[0].contains("5000 values"));
}

#[test]
fn repairs_draft04_forms() {
    let (out, _) = accept(
        json!({"name": "t", "inputSchema": {"type": "object", "properties": {
            "n": {"type": "number", "minimum": 1, "exclusiveMinimum": true},
            "tuple": {"type": "array", "items": [{"type": "string"}, {"type": "number"}]},
            "req": {"type": "object", "required": ["a", "a", "b"]}
        }}}),
    );
    assert_eq!(
        out["properties"]["n"],
        json!({"type": "number", "exclusiveMinimum": 1})
    );
    assert_eq!(
        out["properties"]["tuple"]["prefixItems"][1],
        json!({"type": "number"})
    );
    assert_eq!(out["properties"]["req"]["required"], json!(["a", "b"]));
}

#[test]
fn annotations_become_hints() {
    let (_, t) = accept(json!({"name": "t", "title": "Nice", "annotations": {
        "readOnlyHint": true, "destructiveHint": false, "openWorldHint": "yes"
    }}));
    assert_eq!(
        t.hints,
        Hints {
            title: Some("Nice".into()),
            read_only: Some(true),
            destructive: Some(false),
            idempotent: None,
            open_world: None
        }
    );
}

#[test]
fn descriptions_are_clamped() {
    let (_, t) = accept(json!({"name": "t", "description": "é".repeat(5000)}));
    assert!(t.description.len() <= MAX_DESCRIPTION_BYTES);
    assert_eq!(
        reasons(&t)[0],
        format!("/description clamped to {MAX_DESCRIPTION_BYTES} bytes")
    );
}

#[test]
fn output_schema_problems_drop_only_the_output_schema() {
    let (_, t) = accept(json!({"name": "t", "outputSchema": {"type": "array"}}));
    assert_eq!(t.output_schema, None);
    let (_, t) = accept(
        json!({"name": "t", "outputSchema": {"type": "object", "properties": {"r": {"type": "string"}}}}),
    );
    assert!(t.output_schema.is_some());
}

#[test]
fn notes_are_bounded() {
    let props: serde_json::Map<String, Value> = (0..500)
        .map(|i| (format!("p{i}"), json!({"x-foo": 1})))
        .collect();
    let (_, t) =
        accept(json!({"name": "t", "inputSchema": {"type": "object", "properties": props}}));
    assert_eq!(t.dropped.len(), MAX_NOTES + 1);
    assert_eq!(t.dropped[MAX_NOTES].reason, "436 more changes not listed");
}

#[test]
fn mcp_headers_are_kept_where_allowed_and_refuse_the_tool_elsewhere() {
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "opts": {"type": "object", "properties": {
            "dry": {"type": ["boolean", "null"], "x-mcp-header": "Dry-Run"}
        }}
    }});
    let (out, _) = accept(json!({"name": "t", "inputSchema": schema}));
    assert_eq!(out, schema);
    for bad in [
        // Through an array.
        json!({"type": "object", "properties": {"a": {"type": "array",
            "items": {"type": "string", "x-mcp-header": "A"}}}}),
        // A number.
        json!({"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
        // The same name, other case.
        json!({"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": "Key"},
            "b": {"type": "string", "x-mcp-header": "KEY"}}}),
        // Not a header name.
        json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}),
        json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
        // Under a composition keyword.
        json!({"type": "object", "anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
    ] {
        let tool = json!({"name": "t", "inputSchema": bad}).to_string();
        assert_eq!(reject(&tool), RejectionKind::NotObjectSchema, "{tool}");
    }
    // In an output schema it means nothing: dropped like any vendor keyword.
    let (_, t) = accept(json!({"name": "t", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}}}));
    assert!(t.output_schema.is_some_and(|o| !o.contains("x-mcp-header")));
}
