//! Gemini function declarations (`parameters`, an OpenAPI 3.0 schema subset): one
//! `type` per schema with `nullable` for null, `enum` on strings only, no `$ref` (local
//! ones are inlined), no `additionalProperties`, `oneOf`, `allOf`, `not` or `const`,
//! inclusive bounds only, every array with `items`, and every object below the top with
//! at least one property.

use serde_json::{Map, Value, json};

use super::{
    ANNOTATIONS, Lowering, alternatives, annotations, at, escape, has_own, merge_all_of, said,
    shown, tell, types,
};
use crate::types::Rejection;

/// Formats Gemini accepts, by type.
fn format_allowed(ty: &str, format: &str) -> bool {
    match ty {
        "string" => matches!(format, "enum" | "date-time"),
        "number" => matches!(format, "float" | "double"),
        "integer" => matches!(format, "int32" | "int64"),
        _ => false,
    }
}

pub(super) fn lower(cx: &mut Lowering<'_>) -> Result<Value, Rejection> {
    let root = cx.root;
    let mut out = node(cx, root, "", Place::Root).unwrap_or_else(|| json!({}));
    if let Value::Object(o) = &mut out {
        o.insert("type".into(), Value::String("object".into()));
        o.remove("nullable");
        o.entry("properties").or_insert_with(|| json!({}));
    }
    Ok(out)
}

/// Where a schema sits: rules differ at the top and inside an array's `items`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Root,
    Items,
    Other,
}

/// The schema lowered, or `None` when Gemini cannot declare it at all (the caller drops
/// the property and says so).
fn node(cx: &mut Lowering<'_>, schema: &Value, path: &str, place: Place) -> Option<Value> {
    let map = match schema {
        Value::Object(m) => m,
        Value::Bool(false) => {
            cx.lose(
                path,
                "a schema that accepts nothing cannot be declared; dropped",
            );
            return None;
        }
        _ => {
            cx.lose(path, "any value narrowed to a string");
            return Some(json!({"type": "string"}));
        }
    };
    if !cx.room(path) {
        return Some(json!({"type": "string"}));
    }
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        return match cx.target(reference) {
            Ok(target) => {
                let target = target.clone();
                cx.expanding.push(reference.to_owned());
                let v = node(cx, &target, path, place);
                cx.expanding.pop();
                v
            }
            Err(why) => {
                cx.lose(&at(path, "$ref"), format!("{why}; the property is dropped"));
                None
            }
        };
    }
    let map = merge_all_of(cx, map, path);
    let mut out = annotations(&map);
    if let Some((key, branches)) =
        alternatives(cx, &map, path, !(has_own(&map) || place == Place::Root))
    {
        let mut null = false;
        let mut kept = Vec::new();
        for (i, b) in branches.iter().enumerate() {
            if b.get("type") == Some(&json!("null")) {
                null = true;
                continue;
            }
            // Inside items an alternative is what items becomes, so it keeps that place.
            let inner = if place == Place::Items {
                Place::Items
            } else {
                Place::Other
            };
            if let Some(v) = node(cx, b, &at(&at(path, key), &i.to_string()), inner) {
                kept.push(v);
            }
        }
        if kept.len() > 1 && place == Place::Items {
            cx.lose(
                &at(path, key),
                "alternatives inside array items narrowed to the first: Gemini refuses anyOf there",
            );
            kept.truncate(1);
        }
        let mut lowered = match kept.len() {
            0 => return None,
            1 => kept.pop().unwrap_or_default(),
            _ => json!({"anyOf": kept}),
        };
        if let Value::Object(o) = &mut lowered {
            if null {
                o.insert("nullable".into(), Value::Bool(true));
            }
            for (k, v) in out {
                o.entry(k).or_insert(v);
            }
        }
        return Some(lowered);
    }
    let (names, null) = types(&map);
    let ty = match names.as_slice() {
        [] if place == Place::Root => "object".to_owned(),
        [] if null => {
            cx.lose(
                path,
                "a value that can only be null cannot be declared; dropped",
            );
            return None;
        }
        [] => {
            cx.lose(path, "any value narrowed to a string");
            "string".to_owned()
        }
        [one] => one.clone(),
        [first, ..] if place == Place::Items => {
            cx.lose(
                &at(path, "type"),
                format!("a union of types inside array items narrowed to {first}"),
            );
            first.clone()
        }
        several => {
            let mut branches = Vec::new();
            for t in several {
                let mut one = map.clone().into_owned();
                one.insert("type".into(), Value::String(t.clone()));
                if let Some(v) = node(cx, &Value::Object(one), path, Place::Other) {
                    branches.push(v);
                }
            }
            out.insert("anyOf".into(), Value::Array(branches));
            if null {
                out.insert("nullable".into(), Value::Bool(true));
            }
            return Some(Value::Object(out));
        }
    };
    out.insert("type".into(), Value::String(ty.clone()));
    if null {
        out.insert("nullable".into(), Value::Bool(true));
    }
    let mut said_list = Vec::new();
    for (key, value) in map.iter() {
        let key = key.as_str();
        // Built only for a loss: most keywords have none.
        let here = || at(path, key);
        match key {
            "type" | "title" | "description" | "anyOf" | "oneOf" | "properties" | "required"
            | "items" => {}
            "enum" => match string_enum(value, &ty) {
                Some((values, has_null)) => {
                    out.insert("enum".into(), Value::Array(values));
                    if has_null {
                        out.insert("nullable".into(), Value::Bool(true));
                    }
                    out.entry("format").or_insert_with(|| json!("enum"));
                }
                None => {
                    cx.lose(
                        &here(),
                        "Gemini takes enums of strings only; moved to the description",
                    );
                    said_list.push(format!("one of: {}", shown(value)));
                }
            },
            "const" => match value {
                Value::String(s) if ty == "string" => {
                    out.insert("enum".into(), json!([s]));
                    out.insert("format".into(), json!("enum"));
                }
                _ => {
                    cx.lose(&here(), "Gemini has no const; moved to the description");
                    said_list.push(said(key, value));
                }
            },
            "format" => match value.as_str() {
                Some(f) if format_allowed(&ty, f) => {
                    out.entry("format").or_insert_with(|| value.clone());
                }
                _ => {
                    cx.lose(
                        &here(),
                        "a format Gemini does not know; moved to the description",
                    );
                    said_list.push(said(key, value));
                }
            },
            "minLength" | "maxLength" | "pattern" if ty == "string" => {
                out.insert(key.into(), value.clone());
            }
            "minimum" | "maximum" if ty == "number" || ty == "integer" => {
                tighten(&mut out, key, value);
            }
            "exclusiveMinimum" | "exclusiveMaximum" if ty == "number" || ty == "integer" => {
                cx.lose(
                    &here(),
                    "Gemini has inclusive bounds only; the bound now admits its own value",
                );
                let inclusive = if key == "exclusiveMinimum" {
                    "minimum"
                } else {
                    "maximum"
                };
                tighten(&mut out, inclusive, value);
                said_list.push(said(key, value));
            }
            "minItems" | "maxItems" if ty == "array" => {
                out.insert(key.into(), value.clone());
            }
            "minProperties" | "maxProperties" if ty == "object" => {
                out.insert(key.into(), value.clone());
            }
            "default" => {
                out.insert(key.into(), value.clone());
            }
            "additionalProperties" if *value != Value::Bool(true) => {
                cx.lose(&here(), "Gemini has no additionalProperties; dropped");
            }
            "additionalProperties" => {}
            "$defs" | "definitions" => {}
            k if ANNOTATIONS.contains(&k) => {}
            _ if super::strict::applies(key, &ty) => {
                cx.lose(
                    &here(),
                    "a keyword Gemini does not accept; moved to the description",
                );
                said_list.push(said(key, value));
            }
            _ => {}
        }
    }
    match ty.as_str() {
        "object" => {
            let declared = object(cx, &map, path, &mut out);
            if !declared && place != Place::Root {
                cx.lose(
                    path,
                    "an object without declared properties cannot be declared for Gemini; dropped",
                );
                return None;
            }
        }
        "array" => {
            let items = match map.get("items") {
                Some(items) => node(cx, items, &at(path, "items"), Place::Items),
                None => None,
            };
            let items = items.unwrap_or_else(|| {
                cx.lose(
                    &at(path, "items"),
                    "array items unspecified or dropped; narrowed to strings",
                );
                json!({"type": "string"})
            });
            out.insert("items".into(), items);
        }
        _ => {}
    }
    tell(&mut out, &said_list);
    Some(Value::Object(out))
}

/// An enum's values if all are strings (nulls set aside), and whether null was among them.
fn string_enum(value: &Value, ty: &str) -> Option<(Vec<Value>, bool)> {
    let Value::Array(values) = value else {
        return None;
    };
    if ty != "string" {
        return None;
    }
    let has_null = values.contains(&Value::Null);
    let kept: Vec<Value> = values.iter().filter(|v| !v.is_null()).cloned().collect();
    (kept.iter().all(Value::is_string) && !kept.is_empty()).then_some((kept, has_null))
}

/// Sets an inclusive bound, keeping the tighter of two.
fn tighten(out: &mut Map<String, Value>, key: &str, value: &Value) {
    let Some(new) = value.as_f64() else {
        return;
    };
    let tighter = match out.get(key).and_then(Value::as_f64) {
        Some(old) if key == "minimum" => new > old,
        Some(old) => new < old,
        None => true,
    };
    if tighter {
        out.insert(key.into(), value.clone());
    }
}

/// The object's properties (those Gemini can declare) and `required` (those kept);
/// `false` when none could be declared.
fn object(
    cx: &mut Lowering<'_>,
    map: &Map<String, Value>,
    path: &str,
    out: &mut Map<String, Value>,
) -> bool {
    let mut props = Map::new();
    if let Some(Value::Object(given)) = map.get("properties") {
        for (name, schema) in given {
            let here = format!("{path}/properties/{}", escape(name));
            if let Some(v) = node(cx, schema, &here, Place::Other) {
                props.insert(name.clone(), v);
            }
        }
    }
    if let Some(Value::Array(req)) = map.get("required") {
        let mut kept = Vec::new();
        for r in req {
            match r.as_str() {
                Some(name) if props.contains_key(name) => kept.push(r.clone()),
                Some(name) => cx.lose(
                    &at(&at(path, "properties"), name),
                    "a required property Gemini cannot declare; calls will lack it",
                ),
                None => {}
            }
        }
        if !kept.is_empty() {
            out.insert("required".into(), Value::Array(kept));
        }
    }
    let any = !props.is_empty();
    if any {
        out.insert("properties".into(), Value::Object(props));
    }
    any
}
