//! The conformance suite's multi-round-trip tools (SEP-2322, the stateless era, with
//! `--conformance` only): each answers a first call with `input_required` (its input
//! requests, and for some a `requestState`), and a call that brings the answers back
//! with its result, as the suite's `input-required-result-*` scenarios describe.

use serde_json::{Map, Value, json};

/// The state this server hands out: checked when it comes back, so an altered one is
/// refused.
const STATE: &str = "edgar-example-state-v1";

fn elicit(message: &str, field: &str, kind: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message,
           "requestedSchema": {"type": "object", "properties": {field: {"type": kind}},
                               "required": [field]}}})
}

fn sample(text: &str, max: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max}})
}

fn roots() -> Value {
    json!({"method": "roots/list", "params": {}})
}

/// The prompt that asks for input before it answers (SEP-2322 on a request that is not
/// a tool call).
pub(super) const PROMPT: &str = "test_input_required_result_prompt";

pub(super) fn prompt_descriptor() -> Value {
    json!({"name": PROMPT, "description": "Asks the client for context before it answers."})
}

/// `prompts/get` of [`PROMPT`]: the question, then, with its answer, the prompt.
pub(super) fn prompt(params: &Value) -> Result<Value, (i64, String)> {
    match params["inputResponses"]["user_context"]["content"]["context"].as_str() {
        Some(context) => Ok(
            json!({"messages": [{"role": "user", "content": {"type": "text",
            "text": format!("Answer with this context in mind: {context}")}}]}),
        ),
        None => Ok(json!({"resultType": "input_required", "inputRequests": {
            "user_context": elicit("What context should the prompt use?", "context", "string")}})),
    }
}

/// The tools' descriptors.
pub(super) fn tools() -> Value {
    let names = [
        "test_input_required_result_elicitation",
        "test_input_required_result_sampling",
        "test_input_required_result_list_roots",
        "test_input_required_result_request_state",
        "test_input_required_result_multiple_inputs",
        "test_input_required_result_multi_round",
        "test_input_required_result_tampered_state",
        "test_input_required_result_capabilities",
        "test_missing_capability",
    ];
    names
        .iter()
        .map(|n| {
            json!({"name": n, "description": "Asks the client for input before it answers.",
                   "inputSchema": {"type": "object", "properties": {}}})
        })
        .collect()
}

/// Tool `name`'s answer to a call with `params`, `None` for another tool.
pub(super) fn call(name: &str, params: &Value) -> Option<Result<Value, (i64, String)>> {
    let given = params.get("inputResponses").and_then(Value::as_object);
    let state = params.get("requestState").and_then(Value::as_str);
    let ask = |requests: Value, state: Option<&str>| {
        let mut r = json!({"resultType": "input_required", "inputRequests": requests});
        if let Some(s) = state {
            r["requestState"] = json!(s);
        }
        Ok(r)
    };
    let text = |t: String| Ok(json!({"content": [{"type": "text", "text": t}]}));
    // Each answer's pieces, if every key asked was answered.
    let answered = |keys: &[&str]| -> Option<Map<String, Value>> {
        let given = given?;
        keys.iter()
            .map(|k| given.get(*k).map(|v| ((*k).to_owned(), v.clone())))
            .collect()
    };
    let said = |a: &Map<String, Value>, key: &str, field: &str| {
        a[key]["content"][field]
            .as_str()
            .unwrap_or("someone")
            .to_owned()
    };
    Some(match name {
        "test_input_required_result_elicitation" => match answered(&["user_name"]) {
            Some(a) => text(format!("Hello, {}!", said(&a, "user_name", "name"))),
            None => ask(
                json!({"user_name": elicit("What is your name?", "name", "string")}),
                None,
            ),
        },
        "test_input_required_result_sampling" => match answered(&["capital_question"]) {
            Some(a) => text(format!(
                "The model said: {}",
                a["capital_question"]["content"]["text"]
                    .as_str()
                    .unwrap_or("")
            )),
            None => ask(
                json!({"capital_question": sample("What is the capital of France?", 100)}),
                None,
            ),
        },
        "test_input_required_result_list_roots" => match answered(&["client_roots"]) {
            Some(a) => {
                let uris: Vec<&str> = a["client_roots"]["roots"]
                    .as_array()
                    .map(|r| r.iter().filter_map(|r| r["uri"].as_str()).collect())
                    .unwrap_or_default();
                text(format!("Roots: {}", uris.join(", ")))
            }
            None => ask(json!({"client_roots": roots()}), None),
        },
        "test_input_required_result_request_state" => match (answered(&["confirm"]), state) {
            (Some(_), Some(STATE)) => text("state-ok: the state came back whole".into()),
            (Some(_), _) => Err((-32602, "requestState is missing or altered".into())),
            (None, _) => ask(
                json!({"confirm": elicit("Please confirm", "ok", "boolean")}),
                Some(STATE),
            ),
        },
        "test_input_required_result_multiple_inputs" => {
            match answered(&["user_name", "greeting", "client_roots"]) {
                Some(a) => text(format!(
                    "Hello, {}: all three answers came",
                    said(&a, "user_name", "name")
                )),
                None => ask(
                    json!({"user_name": elicit("What is your name?", "name", "string"),
                           "greeting": sample("Generate a greeting", 50),
                           "client_roots": roots()}),
                    Some(STATE),
                ),
            }
        }
        "test_input_required_result_multi_round" => {
            let round2 = format!("{STATE}:round2");
            match (state, given) {
                (Some(s), Some(g)) if s == round2 && g.contains_key("step2") => text(format!(
                    "Done: {}",
                    g["step2"]["content"]["color"]
                        .as_str()
                        .unwrap_or("no color")
                )),
                (Some(STATE), Some(g)) if g.contains_key("step1") => ask(
                    json!({"step2": elicit("Step 2: What is your favorite color?", "color", "string")}),
                    Some(&round2),
                ),
                _ => ask(
                    json!({"step1": elicit("Step 1: What is your name?", "name", "string")}),
                    Some(STATE),
                ),
            }
        }
        "test_input_required_result_tampered_state" => match (given, state) {
            (Some(_), Some(STATE)) => text("state-ok".into()),
            (Some(_), _) => Err((-32602, "requestState failed its integrity check".into())),
            (None, _) => ask(
                json!({"confirm": elicit("Please confirm", "ok", "boolean")}),
                Some(STATE),
            ),
        },
        // Asks only what the client declared it can answer.
        "test_input_required_result_capabilities" => {
            let declared = &params["_meta"][super::protocol::META_CLIENT_CAPABILITIES];
            let mut requests = Map::new();
            if declared.get("sampling").is_some_and(Value::is_object) {
                requests.insert(
                    "capital_question".into(),
                    sample("What is the capital of France?", 100),
                );
            }
            if declared.get("elicitation").is_some_and(Value::is_object) {
                requests.insert(
                    "user_name".into(),
                    elicit("What is your name?", "name", "string"),
                );
            }
            let keys: Vec<&str> = requests.keys().map(String::as_str).collect();
            match answered(&keys) {
                Some(a) if !keys.is_empty() => text(format!("{} answer(s) came", a.len())),
                _ if keys.is_empty() => text("The client declared nothing to ask.".into()),
                _ => ask(Value::Object(requests), None),
            }
        }
        // Needs the client's model: refused (-32021) to a client that did not declare
        // sampling.
        "test_missing_capability" => {
            let declared = params["_meta"][super::protocol::META_CLIENT_CAPABILITIES]
                .get("sampling")
                .is_some_and(Value::is_object);
            match answered(&["completion"]) {
                Some(_) => text("The client's model answered.".into()),
                None if !declared => Err((-32021, "this tool needs the client's sampling".into())),
                None => ask(json!({"completion": sample("Say anything.", 20)}), None),
            }
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_call_asks_and_one_with_the_answers_completes() {
        let declared = json!({"_meta": {(super::super::protocol::META_CLIENT_CAPABILITIES): {"sampling": {}}}});
        for tool in tools().as_array().into_iter().flatten() {
            let name = tool["name"].as_str().unwrap_or("");
            let first = call(name, &declared).and_then(Result::ok);
            assert_eq!(
                first.as_ref().map(|r| r["resultType"].clone()),
                Some(json!("input_required")),
                "{name}"
            );
        }
        let done = call(
            "test_input_required_result_elicitation",
            &json!({"inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ada"}}}}),
        );
        assert_eq!(
            done.and_then(Result::ok)
                .map(|r| r["content"][0]["text"].clone()),
            Some(json!("Hello, Ada!"))
        );
        let tampered = call(
            "test_input_required_result_tampered_state",
            &json!({"inputResponses": {"confirm": {}}, "requestState": "x"}),
        );
        assert!(matches!(tampered, Some(Err((-32602, _)))));
        let undeclared = call("test_missing_capability", &json!({}));
        assert!(matches!(undeclared, Some(Err((-32021, _)))));
        assert!(call("test_image_content", &json!({})).is_none());
    }
}
