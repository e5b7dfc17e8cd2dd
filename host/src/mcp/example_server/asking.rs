//! The conformance suite's tools that ask the client mid-call (with `--conformance`
//! only): `test_sampling` asks for a completion, the `test_elicitation*` tools for a
//! person's input, each with the request the suite's scenarios check, and each answers
//! with what came back.

use serde_json::{Value, json};

/// The asking tools' descriptors.
pub(super) fn tools() -> Value {
    let with = |name: &str, description: &str, arg: &str, what: &str| {
        json!({"name": name, "description": description,
               "inputSchema": {"type": "object", "properties": {arg: {"type": "string", "description": what}},
                               "required": [arg]}})
    };
    let bare = |name: &str, description: &str| {
        json!({"name": name, "description": description,
               "inputSchema": {"type": "object", "properties": {}}})
    };
    json!([
        with(
            "test_sampling",
            "Asks the client's model to complete a prompt.",
            "prompt",
            "The prompt to send to the model"
        ),
        with(
            "test_elicitation",
            "Asks the user for a username and email.",
            "message",
            "The message to show the user"
        ),
        bare(
            "test_elicitation_sep1034_defaults",
            "Asks the user with a default for every primitive type."
        ),
        bare(
            "test_elicitation_sep1330_enums",
            "Asks the user with every kind of enum."
        ),
    ])
}

/// The request tool `name` makes of the client (method and params), `None` for a tool
/// that asks nothing.
pub(super) fn question(name: &str, args: &Value) -> Option<(&'static str, Value)> {
    let text = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let ask = |message: &str, properties: Value, required: Value| {
        let mut schema = json!({"type": "object", "properties": properties});
        if !required.is_null() {
            schema["required"] = required;
        }
        json!({"message": message, "requestedSchema": schema})
    };
    Some(match name {
        "test_sampling" => (
            "sampling/createMessage",
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": text("prompt")}}],
                   "maxTokens": 100}),
        ),
        "test_elicitation" => (
            "elicitation/create",
            ask(
                &text("message"),
                json!({"username": {"type": "string", "description": "User's response"},
                       "email": {"type": "string", "description": "User's email address"}}),
                json!(["username", "email"]),
            ),
        ),
        "test_elicitation_sep1034_defaults" => (
            "elicitation/create",
            ask(
                "Please review and update the form fields with defaults",
                json!({
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {"type": "string", "description": "User status",
                               "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "description": "Verification status", "default": true},
                }),
                Value::Null,
            ),
        ),
        "test_elicitation_sep1330_enums" => (
            "elicitation/create",
            ask(
                "Please select options from the enum fields",
                json!({
                    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"}]},
                    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                                   "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array",
                                      "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "items": {"anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"}]}},
                }),
                Value::Null,
            ),
        ),
        _ => return None,
    })
}

/// The capability a client must have declared to be asked `method`.
pub(super) fn capability(method: &str) -> &'static str {
    match method {
        "sampling/createMessage" => "sampling",
        _ => "elicitation",
    }
}

/// Tool `name`'s result once the client answered (`Err`: it refused, or could not be
/// asked).
pub(super) fn result(name: &str, answer: Result<Value, String>) -> Value {
    let text = match answer {
        Err(e) => {
            return json!({"content": [{"type": "text", "text": e}], "isError": true});
        }
        Ok(a) if name == "test_sampling" => {
            let said = a["content"]["text"].as_str().unwrap_or("").to_owned();
            format!("LLM response: {said}")
        }
        Ok(a) if name == "test_elicitation" => format!(
            "User response: action={}, content={}",
            a["action"].as_str().unwrap_or("?"),
            a.get("content").cloned().unwrap_or(json!({}))
        ),
        Ok(a) => format!(
            "Elicitation completed: action={}, content={}",
            a["action"].as_str().unwrap_or("?"),
            a.get("content").cloned().unwrap_or(json!({}))
        ),
    };
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

/// Tool `name`'s answer in the stateless era (multi-round-trip requests): the question
/// as an input request the first time, the result once the call comes again with its
/// answer in `inputResponses`.
pub(super) fn stateless(
    name: &str,
    method: &str,
    question: Value,
    params: &Value,
    declared: bool,
) -> Value {
    let mut result = match params["inputResponses"].get(INPUT_KEY) {
        Some(answer) => self::result(name, Ok(answer.clone())),
        None if !declared => self::result(
            name,
            Err(format!("the client did not declare {}", capability(method))),
        ),
        None => {
            return json!({
                "resultType": "input_required",
                "inputRequests": {INPUT_KEY: {"method": method, "params": question}},
                "requestState": name,
            });
        }
    };
    result["resultType"] = json!("complete");
    result
}

/// The key of the one input request an asking tool makes.
const INPUT_KEY: &str = "answer";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_asking_tool_asks_what_the_suite_checks_and_says_what_came_back() {
        let listed: Vec<String> = tools()
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        for name in &listed {
            assert!(question(name, &json!({})).is_some(), "{name}");
        }
        assert!(question("test_image_content", &json!({})).is_none());
        let (method, params) =
            question("test_sampling", &json!({"prompt": "hi"})).unwrap_or(("", Value::Null));
        assert_eq!(method, "sampling/createMessage");
        assert_eq!(params["messages"][0]["content"]["text"], "hi");
        assert_eq!(capability(method), "sampling");
        let (_, params) =
            question("test_elicitation_sep1034_defaults", &json!({})).unwrap_or(("", Value::Null));
        assert_eq!(
            params["requestedSchema"]["properties"]["age"]["default"],
            30
        );
        let said = result(
            "test_sampling",
            Ok(json!({"role": "assistant", "content": {"type": "text", "text": "ok"}})),
        );
        assert_eq!(said["content"][0]["text"], "LLM response: ok");
        let said = result("test_elicitation", Ok(json!({"action": "decline"})));
        assert_eq!(
            said["content"][0]["text"],
            "User response: action=decline, content={}"
        );
        let refused = result("test_sampling", Err("no sampling".into()));
        assert_eq!(refused["isError"], true);
    }

    #[test]
    fn in_the_stateless_era_the_question_comes_back_in_the_result() {
        let (method, question) =
            question("test_elicitation", &json!({"message": "who?"})).unwrap_or(("", Value::Null));
        let first = stateless(
            "test_elicitation",
            method,
            question.clone(),
            &json!({}),
            true,
        );
        assert_eq!(first["resultType"], "input_required");
        assert_eq!(
            first["inputRequests"]["answer"]["method"],
            "elicitation/create"
        );
        assert_eq!(
            first["inputRequests"]["answer"]["params"]["message"],
            "who?"
        );
        let again = json!({"inputResponses": {"answer": {"action": "accept", "content": {"username": "a"}}}});
        let done = stateless("test_elicitation", method, question.clone(), &again, true);
        assert_eq!(done["resultType"], "complete");
        assert_eq!(
            done["content"][0]["text"],
            r#"User response: action=accept, content={"username":"a"}"#
        );
        let undeclared = stateless("test_elicitation", method, question, &json!({}), false);
        assert_eq!(undeclared["isError"], true);
    }
}
