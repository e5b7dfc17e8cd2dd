//! Multi-round-trip requests (SEP-2322, the stateless era): a server that needs input
//! to finish a `tools/call` answers with `resultType: "input_required"`, its
//! `inputRequests` and an opaque `requestState`; edgar answers the requests through the
//! same handler the handshake era uses for a server's own requests, and calls again
//! with `inputResponses` and the state echoed byte for byte.
//!
//! The state is the server's, untrusted and never read; it is only size-capped. A
//! server that keeps asking stops after [`MAX_ROUNDS`].

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::McpError;
use super::ask::{ASKER, Question, Refusal};
use super::connection::ClientHandler;
use super::protocol::MAX_CONTROL_BYTES;
use crate::text::shown;

/// Most input rounds of one request (the official SDKs' default).
pub const MAX_ROUNDS: usize = 10;
/// Largest `requestState` echoed back.
pub const MAX_REQUEST_STATE: usize = 256 << 10;
/// Most input requests in one round.
const MAX_REQUESTS: usize = 16;
/// The wait before retrying a round that asked for nothing but carried state: doubled
/// each time, up to [`STATE_ONLY_MAX`].
const STATE_ONLY_FIRST: Duration = Duration::from_millis(50);
const STATE_ONLY_MAX: Duration = Duration::from_millis(250);

/// A result's kind, read without decoding the rest.
#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "resultType", borrow, default)]
    result_type: Option<&'a str>,
}

#[derive(Deserialize)]
struct Asked {
    #[serde(rename = "inputRequests", default)]
    input_requests: Option<Map<String, Value>>,
    #[serde(rename = "requestState", default)]
    request_state: Option<String>,
}

/// What a server asked for before it can finish a request.
#[derive(Debug)]
pub(crate) struct InputRequired {
    /// Key, method, params.
    pub requests: Vec<(String, String, Value)>,
    pub state: Option<String>,
}

/// The server's request for input in `result`, or `None` for an ordinary result (a
/// missing `resultType` is `"complete"`).
pub(crate) fn required(server: &str, result: &str) -> Result<Option<InputRequired>, McpError> {
    let bad = |reason: String| McpError::Protocol {
        server: server.to_owned(),
        reason,
    };
    let kind = serde_json::from_str::<Kind<'_>>(result)
        .map_err(|e| bad(format!("its result does not decode ({e})")))?;
    match kind.result_type {
        // A task handle is followed by the caller (`task`).
        None | Some("complete") | Some("task") => return Ok(None),
        Some("input_required") => {}
        Some(other) => {
            return Err(bad(format!(
                "its result type is {}, which edgar does not know",
                shown(other)
            )));
        }
    }
    if result.len() > MAX_CONTROL_BYTES {
        return Err(bad(format!(
            "its request for input has {} bytes, over the {MAX_CONTROL_BYTES}-byte limit",
            result.len()
        )));
    }
    let asked: Asked = serde_json::from_str(result)
        .map_err(|e| bad(format!("its request for input does not decode ({e})")))?;
    if let Some(state) = &asked.request_state
        && state.len() > MAX_REQUEST_STATE
    {
        return Err(bad(format!(
            "its requestState has {} bytes, over the {MAX_REQUEST_STATE}-byte limit edgar echoes",
            state.len()
        )));
    }
    let requests = asked.input_requests.unwrap_or_default();
    if requests.is_empty() && asked.request_state.is_none() {
        return Err(bad(
            "it asked for input with neither inputRequests nor requestState".into(),
        ));
    }
    if requests.len() > MAX_REQUESTS {
        return Err(bad(format!(
            "it asked for {} inputs at once (at most {MAX_REQUESTS})",
            requests.len()
        )));
    }
    let requests = requests
        .into_iter()
        .map(|(key, request)| {
            let method = request
                .get("method")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("its input request {} has no method", shown(&key))))?
                .to_owned();
            let params = request.get("params").cloned().unwrap_or(json!({}));
            Ok((key, method, params))
        })
        .collect::<Result<_, McpError>>()?;
    Ok(Some(InputRequired {
        requests,
        state: asked.request_state,
    }))
}

/// Drives the rounds of one request: `send` makes the request with the extra params
/// given (none the first time) and returns its result text.
pub(crate) async fn rounds<F, Fut>(
    server: &str,
    handler: &Arc<dyn ClientHandler>,
    mut send: F,
) -> Result<Box<serde_json::value::RawValue>, McpError>
where
    F: FnMut(Option<(Value, Option<String>)>) -> Fut,
    Fut: std::future::Future<Output = Result<Box<serde_json::value::RawValue>, McpError>>,
{
    let mut text = send(None).await?;
    let mut round = 0;
    let mut state_only = STATE_ONLY_FIRST;
    while let Some(asked) = required(server, text.get())? {
        round += 1;
        if round > MAX_ROUNDS {
            return Err(McpError::Protocol {
                server: server.to_owned(),
                reason: format!("it asked for input more than {MAX_ROUNDS} times for one request"),
            });
        }
        let responses = if asked.requests.is_empty() {
            tokio::time::sleep(state_only).await;
            state_only = (state_only * 2).min(STATE_ONLY_MAX);
            None
        } else {
            state_only = STATE_ONLY_FIRST;
            Some(answer(server, handler, asked.requests).await?)
        };
        let extra = responses.unwrap_or(Value::Null);
        text = send(Some((extra, asked.state))).await?;
    }
    Ok(text)
}

/// Answers every input request, or fails the request naming what edgar cannot give.
/// Elicitation and sampling go to the call's caller when it can be asked
/// ([`ASKER`]), else to the harness's handler (on a blocking thread: it may ask a
/// human); roots are not offered in this era.
pub(crate) async fn answer(
    server: &str,
    handler: &Arc<dyn ClientHandler>,
    requests: Vec<(String, String, Value)>,
) -> Result<Value, McpError> {
    let mut responses = Map::new();
    if let Ok(asker) = ASKER.try_with(Clone::clone) {
        let questions = requests
            .iter()
            .map(|(key, method, params)| Question {
                key: key.clone(),
                method: method.clone(),
                params: params.clone(),
            })
            .collect();
        match asker.ask(server, questions).await {
            Some(Ok(answers)) if answers.len() == requests.len() => {
                for ((key, _, _), answer) in requests.into_iter().zip(answers) {
                    responses.insert(key, answer);
                }
                return Ok(Value::Object(responses));
            }
            Some(Err(Refusal::Undeclared(capability))) => {
                return Err(McpError::MissingCapability {
                    server: server.to_owned(),
                    capability,
                });
            }
            Some(Err(Refusal::Failed(refusal))) => {
                return Err(McpError::Exchange {
                    server: server.to_owned(),
                    method: "its request for input".into(),
                    reason: format!("it asked the client, which refused: {}", shown(&refusal)),
                });
            }
            Some(Ok(_)) | None => {}
        }
    }
    for (key, method, params) in requests {
        let h = handler.clone();
        let (s, m) = (server.to_owned(), method.clone());
        let got = tokio::task::spawn_blocking(move || match m.as_str() {
            "elicitation/create" if h.supports_elicitation() => h.elicit(&s, &params),
            "sampling/createMessage" => h.sample(&s, &params),
            _ => None,
        })
        .await
        .ok()
        .flatten();
        match got {
            Some(result) => {
                responses.insert(key, result);
            }
            None => {
                return Err(McpError::Exchange {
                    server: server.to_owned(),
                    method: "its request for input".into(),
                    reason: format!(
                        "it asked for {} ({}), which edgar cannot answer here",
                        shown(&method),
                        match method.as_str() {
                            "elicitation/create" => "a human's input",
                            "sampling/createMessage" => "a completion from the model",
                            "roots/list" => "the workspace roots, not offered in this protocol era",
                            _ => "unknown to edgar",
                        }
                    ),
                });
            }
        }
    }
    Ok(Value::Object(responses))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_results_are_complete() {
        for r in [
            r#"{"content": []}"#,
            r#"{"resultType": "complete", "content": []}"#,
        ] {
            assert!(matches!(required("s", r), Ok(None)), "{r}");
        }
    }

    #[test]
    fn requests_for_input_are_read_and_checked() {
        let asked = required(
            "s",
            r#"{"resultType": "input_required", "inputRequests": {"k": {"method": "elicitation/create", "params": {"message": "name?"}}}, "requestState": "opaque"}"#,
        );
        let Ok(Some(asked)) = asked else {
            panic!("{asked:?}");
        };
        assert_eq!(asked.requests[0].0, "k");
        assert_eq!(asked.requests[0].1, "elicitation/create");
        assert_eq!(asked.state.as_deref(), Some("opaque"));
        let e = |r: &str| {
            required("s", r)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(e(r#"{"resultType": "input_required"}"#).contains("neither"));
        assert!(e(r#"{"resultType": "later"}"#).contains("does not know"));
        let big = format!(
            r#"{{"resultType": "input_required", "requestState": "{}"}}"#,
            "x".repeat(MAX_REQUEST_STATE + 1)
        );
        assert!(e(&big).contains("requestState has"));
        let many: Map<String, Value> = (0..=MAX_REQUESTS)
            .map(|i| (i.to_string(), json!({"method": "elicitation/create"})))
            .collect();
        let many = json!({"resultType": "input_required", "inputRequests": many}).to_string();
        assert!(e(&many).contains("inputs at once"));
    }
}
