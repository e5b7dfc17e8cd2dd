use serde_json::{Value, json};

use super::*;

fn lower(provider: Provider, schema: Value) -> (Value, Vec<String>) {
    let l = lower_schema(provider, &schema.to_string()).unwrap_or_else(|r| panic!("{r:?}"));
    let v = serde_json::from_str(&l.input_schema).unwrap_or_else(|e| panic!("{e}"));
    let losses = l
        .losses
        .into_iter()
        .map(|d| format!("{} {}", d.path, d.reason))
        .collect();
    (v, losses)
}

fn has(losses: &[String], path_and_word: (&str, &str)) -> bool {
    losses
        .iter()
        .any(|l| l.starts_with(&format!("{} ", path_and_word.0)) && l.contains(path_and_word.1))
}

#[test]
fn generic_is_the_accepted_schema_unchanged() {
    let s = json!({"type": "object", "properties": {"a": {"type": "string", "format": "email"}}});
    let l = lower_schema(Provider::Generic, &s.to_string()).unwrap_or_else(|r| panic!("{r:?}"));
    assert_eq!(l.input_schema, s.to_string());
    assert!(l.losses.is_empty());
}

#[test]
fn bad_input_is_refused() {
    for (input, kind) in [
        ("not json", RejectionKind::InvalidJson),
        ("[1]", RejectionKind::NotObjectSchema),
    ] {
        let r = lower_schema(Provider::Gemini, input).err();
        assert_eq!(r.map(|r| r.kind), Some(kind), "{input}");
    }
    let huge = format!("{{\"description\": \"{}\"}}", "x".repeat(MAX_SCHEMA_BYTES));
    let r = lower_schema(Provider::OpenAiStrict, &huge).err();
    assert_eq!(r.map(|r| r.kind), Some(RejectionKind::TooLarge));
}

#[test]
fn strict_requires_every_property_and_closes_every_object() {
    let (v, losses) = lower(
        Provider::OpenAiStrict,
        json!({
            "type": "object",
            "properties": {
                "q": {"type": "string", "minLength": 2, "format": "uri"},
                "when": {"type": "string", "format": "date-time"},
                "limit": {"type": "integer", "default": 10, "minimum": 1},
                "filter": {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "ids": {"type": "array"},
                "kind": {"const": "issue"}
            },
            "required": ["q"]
        }),
    );
    assert_eq!(
        v["required"],
        json!(["q", "when", "limit", "filter", "labels", "ids", "kind"])
    );
    assert_eq!(v["additionalProperties"], json!(false));
    assert_eq!(v["properties"]["q"]["type"], json!("string"));
    assert_eq!(v["properties"]["when"]["type"], json!(["string", "null"]));
    assert_eq!(v["properties"]["when"]["format"], json!("date-time"));
    assert_eq!(v["properties"]["limit"]["type"], json!(["integer", "null"]));
    assert_eq!(v["properties"]["limit"]["minimum"], json!(1));
    assert!(v["properties"]["limit"].get("default").is_none());
    let q = &v["properties"]["q"];
    assert!(q.get("minLength").is_none() && q.get("format").is_none());
    assert_eq!(q["description"], json!("(minLength: 2; format: uri)"));
    assert_eq!(
        v["properties"]["filter"]["additionalProperties"],
        json!(false)
    );
    assert_eq!(v["properties"]["filter"]["required"], json!(["tag"]));
    assert_eq!(v["properties"]["labels"]["properties"], json!({}));
    assert!(v["properties"]["ids"]["items"]["anyOf"].is_array());
    assert_eq!(v["properties"]["kind"]["enum"], json!(["issue", null]));
    assert!(has(&losses, ("/properties/when", "nullable")));
    assert!(has(&losses, ("/properties/q/format", "format")));
    assert!(has(&losses, ("/properties/q/minLength", "does not accept")));
    assert!(has(&losses, ("/properties/limit/default", "default")));
    assert!(has(
        &losses,
        ("/properties/labels/additionalProperties", "free-form")
    ));
    assert!(has(&losses, ("/properties/ids/items", "unspecified")));
    assert!(
        !losses.iter().any(|l| l.starts_with("/properties/q ")),
        "{losses:?}"
    );
}

#[test]
fn strict_keeps_refs_to_definitions_and_inlines_others() {
    let (v, losses) = lower(
        Provider::OpenAiStrict,
        json!({
            "type": "object",
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
            "properties": {
                "head": {"$ref": "#/$defs/node"},
                "copy": {"$ref": "#/properties/head"},
                "pick": {"oneOf": [{"type": "string"}, {"type": "integer"}]}
            },
            "required": ["head", "copy", "pick"]
        }),
    );
    assert_eq!(v["properties"]["head"], json!({"$ref": "#/$defs/node"}));
    assert_eq!(v["properties"]["copy"], json!({"$ref": "#/$defs/node"}));
    let next = &v["$defs"]["node"]["properties"]["next"];
    assert_eq!(next["anyOf"][0], json!({"$ref": "#/$defs/node"}));
    assert_eq!(v["$defs"]["node"]["additionalProperties"], json!(false));
    assert_eq!(
        v["properties"]["pick"]["anyOf"].as_array().map(Vec::len),
        Some(2)
    );
    assert!(has(&losses, ("/properties/pick/oneOf", "anyOf")));
}

#[test]
fn strict_refuses_what_it_cannot_fit() {
    let mut props = serde_json::Map::new();
    for i in 0..5001 {
        props.insert(format!("p{i}"), json!({"type": "string"}));
    }
    let s = json!({"type": "object", "properties": props});
    let r = lower_schema(Provider::OpenAiStrict, &s.to_string()).err();
    assert!(r.is_some_and(|r| r.message.contains("5001 properties")));
    let mut deep = json!({"type": "string"});
    for _ in 0..11 {
        deep = json!({"type": "object", "properties": {"x": deep}, "required": ["x"]});
    }
    let r = lower_schema(Provider::OpenAiStrict, &deep.to_string()).err();
    assert!(r.is_some_and(|r| r.message.contains("levels of nesting")));
}

#[test]
fn gemini_speaks_the_openapi_subset() {
    let (v, losses) = lower(
        Provider::Gemini,
        json!({
            "type": "object",
            "$defs": {"tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}}, "name": {"type": "string"}}}},
            "properties": {
                "maybe": {"type": ["string", "null"]},
                "level": {"type": "integer", "enum": [1, 2, 3]},
                "mode": {"enum": ["a", "b", null]},
                "above": {"type": "number", "exclusiveMinimum": 0},
                "email": {"type": "string", "format": "email"},
                "bag": {"type": "object", "additionalProperties": true},
                "tree": {"$ref": "#/$defs/tree"},
                "mixed": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
                "either": {"anyOf": [{"type": "string"}, {"type": "null"}]}
            },
            "required": ["bag", "level"],
            "additionalProperties": false
        }),
    );
    let p = &v["properties"];
    assert_eq!(p["maybe"], json!({"type": "string", "nullable": true}));
    assert_eq!(p["level"]["type"], json!("integer"));
    assert!(p["level"].get("enum").is_none());
    assert_eq!(p["level"]["description"], json!("(one of: [1,2,3])"));
    assert_eq!(p["mode"]["enum"], json!(["a", "b"]));
    assert_eq!(p["mode"]["nullable"], json!(true));
    assert_eq!(p["above"]["minimum"], json!(0));
    assert!(p["email"].get("format").is_none());
    assert!(p.get("bag").is_none());
    assert_eq!(v["required"], json!(["level"]));
    assert!(v.get("$defs").is_none() && v.get("additionalProperties").is_none());
    assert_eq!(p["tree"]["properties"]["name"]["type"], json!("string"));
    assert_eq!(
        p["tree"]["properties"]["kids"]["items"],
        json!({"type": "string"})
    );
    assert_eq!(p["mixed"]["items"], json!({"type": "string"}));
    assert_eq!(p["either"], json!({"type": "string", "nullable": true}));
    assert!(has(
        &losses,
        ("/properties/above/exclusiveMinimum", "inclusive")
    ));
    assert!(has(
        &losses,
        ("/properties/bag", "without declared properties")
    ));
    assert!(has(
        &losses,
        ("/properties/tree/properties/kids/items/$ref", "recursive")
    ));
    assert!(has(&losses, ("/properties/mixed/items/anyOf", "first")));
    assert!(has(
        &losses,
        ("/additionalProperties", "no additionalProperties")
    ));
    assert!(
        !serde_json::to_string(&v)
            .unwrap_or_default()
            .contains("$ref")
    );
}

#[test]
fn anthropic_flattens_only_top_level_alternatives() {
    let (v, losses) = lower(
        Provider::Anthropic,
        json!({
            "type": "object",
            "properties": {"id": {"type": "string"}, "x": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
            "anyOf": [
                {"properties": {"url": {"type": "string"}}, "required": ["id", "url"]},
                {"properties": {"path": {"type": "string"}}, "required": ["id", "path"]}
            ]
        }),
    );
    assert!(v.get("anyOf").is_none());
    assert_eq!(v["required"], json!(["id"]));
    assert!(v["properties"]["url"].is_object() && v["properties"]["path"].is_object());
    assert!(
        v["properties"]["x"]["oneOf"].is_array(),
        "nested combinators stay"
    );
    assert_eq!(losses.len(), 1, "{losses:?}");
}

#[test]
fn lowering_is_bounded_on_ref_explosions() {
    // Each level refers to the next one twice: inlined naively, 2^30 nodes.
    let mut defs = serde_json::Map::new();
    for i in 0..30 {
        defs.insert(
            format!("d{i}"),
            json!({"type": "object", "properties": {"a": {"$ref": format!("#/$defs/d{}", i + 1)}, "b": {"$ref": format!("#/$defs/d{}", i + 1)}}}),
        );
    }
    defs.insert("d30".into(), json!({"type": "string"}));
    let s =
        json!({"type": "object", "$defs": defs, "properties": {"root": {"$ref": "#/$defs/d0"}}});
    let (v, losses) = lower(Provider::Gemini, s);
    assert!(v.to_string().len() < 4 << 20);
    assert!(
        losses.iter().any(|l| l.contains("subschemas")),
        "{losses:?}"
    );
}
