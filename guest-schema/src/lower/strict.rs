//! OpenAI strict mode (Structured Outputs' supported schemas): every object closed with
//! `additionalProperties: false` and listing all its properties in `required` (an
//! optional one becomes nullable, null standing for absent), a keyword subset, `anyOf`
//! but no other combinator, and limits on nesting, properties and enum values.

use serde_json::{Map, Value, json};

use super::{
    ANNOTATIONS, Lowering, alternatives, annotations, at, escape, has_own, merge_all_of, said,
    tell, types,
};
use crate::types::{Rejection, RejectionKind};

/// String formats strict mode accepts.
const FORMATS: &[&str] = &[
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
/// Keywords strict mode accepts on numbers.
const NUMBER_KEYWORDS: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
];
/// Published limits: nesting levels, object properties in all, enum values in all.
const MAX_DEPTH: usize = 10;
const MAX_PROPERTIES: usize = 5000;
const MAX_ENUM_VALUES: usize = 1000;

pub(super) fn lower(cx: &mut Lowering<'_>) -> Result<Value, Rejection> {
    let root = cx.root;
    let mut out = node(cx, root, "", true);
    if let Value::Object(o) = &mut out {
        o.insert("type".into(), Value::String("object".into()));
    }
    let (depth, properties, enums) = measure(&out);
    let over = if depth > MAX_DEPTH {
        Some(format!("{depth} levels of nesting, over {MAX_DEPTH}"))
    } else if properties > MAX_PROPERTIES {
        Some(format!("{properties} properties, over {MAX_PROPERTIES}"))
    } else if enums > MAX_ENUM_VALUES {
        Some(format!("{enums} enum values, over {MAX_ENUM_VALUES}"))
    } else {
        None
    };
    match over {
        Some(why) => Err(Rejection::new(
            RejectionKind::TooLarge,
            format!("cannot be lowered for OpenAI strict mode: {why}"),
        )),
        None => Ok(out),
    }
}

/// Any JSON value strict mode can carry without an object's fixed keys.
fn any_value() -> Value {
    json!({"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]})
}

/// `schema` also accepting null: how strict mode says a property may be absent.
pub(super) fn nullable(schema: Value) -> Value {
    let Value::Object(mut o) = schema else {
        return schema;
    };
    if let Some(Value::Array(branches)) = o.get_mut("anyOf") {
        if !branches
            .iter()
            .any(|b| b.get("type") == Some(&json!("null")))
        {
            branches.push(json!({"type": "null"}));
        }
        return Value::Object(o);
    }
    if o.contains_key("$ref") {
        return json!({"anyOf": [Value::Object(o), {"type": "null"}]});
    }
    match o.get_mut("type") {
        Some(Value::String(t)) if t != "null" => {
            let t = std::mem::take(t);
            o.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(ts)) if !ts.contains(&json!("null")) => ts.push(json!("null")),
        _ => {}
    }
    if let Some(Value::Array(vs)) = o.get_mut("enum")
        && !vs.contains(&Value::Null)
    {
        vs.push(Value::Null);
    }
    Value::Object(o)
}

fn node(cx: &mut Lowering<'_>, schema: &Value, path: &str, root: bool) -> Value {
    let map = match schema {
        Value::Object(m) => m,
        Value::Bool(false) => {
            cx.lose(path, "a schema that accepts nothing became null");
            return json!({"type": "null"});
        }
        _ => {
            cx.lose(path, "any value narrowed to a string, number or boolean");
            return any_value();
        }
    };
    if !cx.room(path) {
        return any_value();
    }
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        return reference_to(cx, map, reference, path);
    }
    let map = merge_all_of(cx, map, path);
    let mut said_list = Vec::new();
    let mut out = annotations(&map);
    if let Some((key, branches)) = alternatives(cx, &map, path, !(has_own(&map) || root)) {
        let lowered: Vec<Value> = branches
            .iter()
            .enumerate()
            .map(|(i, b)| node(cx, b, &at(&at(path, key), &i.to_string()), false))
            .collect();
        out.insert("anyOf".into(), Value::Array(lowered));
        return Value::Object(out);
    }
    let (names, null) = types(&map);
    if names.len() > 1 {
        let mut branches: Vec<Value> = names
            .iter()
            .map(|t| {
                let mut one = map.clone().into_owned();
                one.insert("type".into(), Value::String(t.clone()));
                node(cx, &Value::Object(one), path, false)
            })
            .collect();
        if null {
            branches.push(json!({"type": "null"}));
        }
        out.insert("anyOf".into(), Value::Array(branches));
        return Value::Object(out);
    }
    let ty = match names.first() {
        Some(t) => t.clone(),
        None if null => "null".to_owned(),
        None if root => "object".to_owned(),
        None => {
            cx.lose(path, "any value narrowed to a string, number or boolean");
            let mut any = any_value();
            if let Value::Object(a) = &mut any {
                a.extend(out);
            }
            return any;
        }
    };
    out.insert(
        "type".into(),
        if null && ty != "null" {
            json!([ty, "null"])
        } else {
            Value::String(ty.clone())
        },
    );
    for (key, value) in map.iter() {
        let key = key.as_str();
        // Built only for a loss: most keywords have none.
        let here = || at(path, key);
        match key {
            "type"
            | "title"
            | "description"
            | "anyOf"
            | "oneOf"
            | "properties"
            | "required"
            | "additionalProperties"
            | "items" => {}
            "$defs" | "definitions" if root => {
                if let Value::Object(defs) = value {
                    let lowered: Map<String, Value> = defs
                        .iter()
                        .map(|(k, d)| (k.clone(), node(cx, d, &at(&here(), k), false)))
                        .collect();
                    out.insert(key.into(), Value::Object(lowered));
                }
            }
            "$defs" | "definitions" => cx.lose(&here(), "definitions below the top level dropped"),
            "enum" => {
                out.insert(key.into(), value.clone());
            }
            "const" => {
                out.insert("enum".into(), Value::Array(vec![value.clone()]));
            }
            "format" if ty == "string" => {
                if value.as_str().is_some_and(|f| FORMATS.contains(&f)) {
                    out.insert(key.into(), value.clone());
                } else {
                    cx.lose(
                        &here(),
                        "a format strict mode does not know; moved to the description",
                    );
                    said_list.push(said(key, value));
                }
            }
            "pattern" if ty == "string" => {
                out.insert(key.into(), value.clone());
            }
            "minItems" | "maxItems" if ty == "array" => {
                out.insert(key.into(), value.clone());
            }
            k if NUMBER_KEYWORDS.contains(&k) && (ty == "number" || ty == "integer") => {
                out.insert(key.into(), value.clone());
            }
            k if ANNOTATIONS.contains(&k) => {}
            "default" => {
                cx.lose(
                    &here(),
                    "a default strict mode cannot carry; moved to the description",
                );
                said_list.push(said(key, value));
            }
            _ if applies(key, &ty) => {
                cx.lose(
                    &here(),
                    "a keyword strict mode does not accept; moved to the description",
                );
                said_list.push(said(key, value));
            }
            _ => {}
        }
    }
    match ty.as_str() {
        "object" => object(cx, &map, path, &mut out),
        "array" => {
            let items = match map.get("items") {
                Some(items) => node(cx, items, &at(path, "items"), false),
                None => {
                    cx.lose(
                        &at(path, "items"),
                        "array items unspecified; narrowed to strings, numbers or booleans",
                    );
                    any_value()
                }
            };
            out.insert("items".into(), items);
        }
        _ => {}
    }
    tell(&mut out, &said_list);
    Value::Object(out)
}

/// A `$ref` strict mode can follow (to `$defs`, `definitions` or the root) stays;
/// any other is inlined.
fn reference_to(
    cx: &mut Lowering<'_>,
    map: &Map<String, Value>,
    reference: &str,
    path: &str,
) -> Value {
    if reference == "#"
        || reference.starts_with("#/$defs/")
        || reference.starts_with("#/definitions/")
    {
        let mut out = Map::new();
        out.insert("$ref".into(), Value::String(reference.to_owned()));
        if map.keys().any(|k| {
            k != "$ref" && !ANNOTATIONS.contains(&k.as_str()) && k != "description" && k != "title"
        }) {
            cx.lose(path, "keywords beside $ref dropped");
        }
        return Value::Object(out);
    }
    match cx.target(reference) {
        Ok(target) => {
            let target = target.clone();
            cx.expanding.push(reference.to_owned());
            let v = node(cx, &target, path, false);
            cx.expanding.pop();
            v
        }
        Err(why) => {
            cx.lose(&at(path, "$ref"), why);
            any_value()
        }
    }
}

/// An object closed: every property listed and required, the optional ones nullable.
fn object(
    cx: &mut Lowering<'_>,
    map: &Map<String, Value>,
    path: &str,
    out: &mut Map<String, Value>,
) {
    let required: Vec<&str> = match map.get("required") {
        Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut props = Map::new();
    if let Some(Value::Object(given)) = map.get("properties") {
        for (name, schema) in given {
            let here = format!("{path}/properties/{}", escape(name));
            let mut lowered = node(cx, schema, &here, false);
            if !required.contains(&name.as_str()) {
                cx.lose(
                    &here,
                    "optional: now required and nullable, null standing for absent",
                );
                lowered = nullable(lowered);
            }
            props.insert(name.clone(), lowered);
        }
    }
    let open = match map.get("additionalProperties") {
        Some(Value::Bool(false)) => false,
        Some(Value::Object(_)) => true,
        _ => props.is_empty(),
    };
    if open {
        cx.lose(
            &at(path, "additionalProperties"),
            "free-form keys cannot be sent in strict mode; the object is closed",
        );
    }
    let names: Vec<Value> = props.keys().map(|k| Value::String(k.clone())).collect();
    out.insert("properties".into(), Value::Object(props));
    out.insert("required".into(), Value::Array(names));
    out.insert("additionalProperties".into(), Value::Bool(false));
}

/// Whether a keyword constrains a value of type `ty` (one that does not is meaningless
/// there and goes without a report).
pub(super) fn applies(key: &str, ty: &str) -> bool {
    match key {
        "minLength" | "maxLength" | "pattern" | "format" | "contentSchema" => ty == "string",
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => {
            ty == "number" || ty == "integer"
        }
        "prefixItems" | "uniqueItems" | "contains" | "minContains" | "maxContains"
        | "unevaluatedItems" | "minItems" | "maxItems" => ty == "array",
        "patternProperties"
        | "propertyNames"
        | "minProperties"
        | "maxProperties"
        | "unevaluatedProperties"
        | "dependentRequired"
        | "dependentSchemas" => ty == "object",
        _ => true,
    }
}

/// Nesting levels, object properties and enum values of a lowered schema.
fn measure(v: &Value) -> (usize, usize, usize) {
    let Value::Object(o) = v else {
        return (0, 0, 0);
    };
    let mut depth = 0;
    let own_properties = o
        .get("properties")
        .and_then(Value::as_object)
        .map_or(0, Map::len);
    let mut properties = own_properties;
    let mut enums = o.get("enum").and_then(Value::as_array).map_or(0, Vec::len);
    let mut child = |c: &Value| {
        let (d, p, e) = measure(c);
        depth = depth.max(d);
        properties += p;
        enums += e;
    };
    if let Some(Value::Object(ps)) = o.get("properties") {
        ps.values().for_each(&mut child);
    }
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(ds)) = o.get(key) {
            ds.values().for_each(&mut child);
        }
    }
    if let Some(items) = o.get("items") {
        child(items);
    }
    if let Some(Value::Array(bs)) = o.get("anyOf") {
        bs.iter().for_each(&mut child);
    }
    let own = usize::from(o.contains_key("properties"));
    (depth + own, properties, enums)
}
