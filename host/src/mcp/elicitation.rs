//! The CLI's answer to `elicitation/create`: accept with the requested schema's
//! defaults when they cover every required field, otherwise decline. No human is
//! asked, so nothing beyond what the server itself proposed is ever sent back.

use serde_json::{Map, Value, json};

use super::connection::ClientHandler;

/// Declares elicitation and answers it from schema defaults.
pub struct AcceptDefaults;

impl ClientHandler for AcceptDefaults {
    fn supports_elicitation(&self) -> bool {
        true
    }

    fn elicit(&self, server: &str, params: &Value) -> Option<Value> {
        let answer = defaults_answer(params);
        tracing::info!(
            server,
            "elicitation answered: {}",
            answer["action"].as_str().unwrap_or("decline")
        );
        Some(answer)
    }
}

/// `{"action":"accept","content":{...defaults}}` when every required property has a
/// default of its declared primitive type; `{"action":"decline"}` otherwise (and for
/// URL-mode requests, which need a human).
pub fn defaults_answer(params: &Value) -> Value {
    let decline = json!({"action": "decline"});
    if params.get("mode").and_then(Value::as_str) == Some("url") {
        return decline;
    }
    let Some(schema) = params.get("requestedSchema") else {
        return decline;
    };
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut content = Map::new();
    for (name, property) in &properties {
        if let Some(default) = property.get("default")
            && fits(property, default)
        {
            content.insert(name.clone(), default.clone());
        }
    }
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let covered = required
        .iter()
        .all(|r| r.as_str().is_some_and(|r| content.contains_key(r)));
    if !covered {
        return decline;
    }
    json!({"action": "accept", "content": content})
}

/// Whether `value` is a primitive of the property's declared type (and one of its
/// `enum` values, if it has them).
fn fits(property: &Value, value: &Value) -> bool {
    let typed = match property.get("type").and_then(Value::as_str) {
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => false,
    };
    let listed = match property.get("enum").and_then(Value::as_array) {
        Some(options) => options.contains(value),
        None => true,
    };
    typed && listed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_the_form() {
        let params = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
            "verified": {"type": "boolean", "default": true},
            "note": {"type": "string"}
        }, "required": ["name"]}});
        assert_eq!(
            defaults_answer(&params),
            json!({"action": "accept", "content": {"name": "John Doe", "age": 30, "score": 95.5,
                "status": "active", "verified": true}})
        );
    }

    #[test]
    fn missing_or_wrong_defaults_decline() {
        let required_without_default = json!({"requestedSchema": {"properties": {
            "email": {"type": "string"}}, "required": ["email"]}});
        assert_eq!(
            defaults_answer(&required_without_default)["action"],
            "decline"
        );
        let wrong_type = json!({"requestedSchema": {"properties": {
            "age": {"type": "integer", "default": "thirty"}}, "required": ["age"]}});
        assert_eq!(defaults_answer(&wrong_type)["action"], "decline");
        let not_listed = json!({"requestedSchema": {"properties": {
            "s": {"type": "string", "enum": ["a"], "default": "b"}}, "required": ["s"]}});
        assert_eq!(defaults_answer(&not_listed)["action"], "decline");
        assert_eq!(
            defaults_answer(&json!({"mode": "url", "url": "https://x"}))["action"],
            "decline"
        );
        assert_eq!(defaults_answer(&json!(null))["action"], "decline");
    }
}
