//! A tool call through the gateway: the served list (the built-ins, then what searches
//! found), `tools/call` and `call_tool`, and the upstream call's outcome, progress and
//! logs as the client receives them.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::team::policy::Action;
use super::{CALL_TOOL, Caller, Exposure, Gateway, MANY_TOOLS, Refused, Reply, SEARCH_DESCRIPTION};
use crate::guard::SanitizedTool;
use crate::mcp::McpError;
use crate::mcp::client::Session;
use crate::mcp::connection::{LogSink, PROGRESS, ProgressSink};
use crate::mcp::protocol::{self, INVALID_PARAMS};
use crate::tools::search_tool::{self, TOOL_SEARCH};

impl Gateway {
    /// The served list: the two built-ins, then every tool found so far (every tool with
    /// `--expose all`); for one server transparently, its tools alone by their own names.
    pub(super) async fn tools(&self, caller: &Caller) -> Vec<Value> {
        let search = search_tool::definition();
        let transparent = matches!(self.exposure, Exposure::Transparent(_));
        let mut tools = vec![
            json!({
                "name": TOOL_SEARCH,
                "description": SEARCH_DESCRIPTION,
                "inputSchema": search["input_schema"],
            }),
            json!({
                "name": CALL_TOOL,
                "description": "Call a tool that tool_search returned, by its name, with arguments matching the schema it returned.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "The tool's name as tool_search returned it"},
                        "arguments": {"type": "object", "description": "The tool's arguments"}
                    },
                    "required": ["name"]
                },
            }),
        ];
        if transparent {
            tools.clear();
        }
        let served = if self.expose_all {
            let catalog = self.session.catalog().await;
            for e in &catalog.failures {
                tracing::warn!("{}", crate::text::shown_message(&e.to_string()));
            }
            if catalog.tools.len() > MANY_TOOLS {
                tracing::warn!(
                    "serving {} tools: some clients take at most {MANY_TOOLS} (OpenAI) or 40 \
                     (Cursor); serve without --expose all, or with --servers, to stay under",
                    catalog.tools.len()
                );
            }
            catalog.tools
        } else {
            self.sync_found(caller).await;
            self.search.found_by(caller.key())
        };
        for t in served {
            if !self.permits(caller, Action::ListTools, &t).allowed() {
                continue;
            }
            let mut tool = json!({
                "name": if transparent { t.tool() } else { t.name() },
                "description": t.description(),
                "inputSchema": t.input_schema(),
            });
            let h = t.hints();
            let mut annotations = serde_json::Map::new();
            for (key, value) in [
                ("title", h.title.as_ref().map(|t| json!(t))),
                ("readOnlyHint", h.read_only.map(Value::Bool)),
                ("destructiveHint", h.destructive.map(Value::Bool)),
                ("idempotentHint", h.idempotent.map(Value::Bool)),
                ("openWorldHint", h.open_world.map(Value::Bool)),
            ] {
                if let Some(v) = value {
                    annotations.insert(key.into(), v);
                }
            }
            if !annotations.is_empty() {
                tool["annotations"] = Value::Object(annotations);
            }
            tools.push(tool);
        }
        tools
    }

    pub(super) async fn call(
        &self,
        caller: &Caller,
        name: &str,
        args: Value,
        tx: &mpsc::Sender<Vec<u8>>,
        progress: Option<ProgressSink>,
    ) -> Reply {
        if let Exposure::Transparent(server) = &self.exposure {
            return self
                .call_found(caller, &format!("{server}/{name}"), args, progress)
                .await;
        }
        match name {
            TOOL_SEARCH => {
                let Some(query) = args.get("query").and_then(Value::as_str) else {
                    return Err((INVALID_PARAMS, "tool_search needs a query".into()).into());
                };
                let user = caller.key();
                let before = self.search.found_count(user);
                let allowed =
                    |t: &SanitizedTool| self.permits(caller, Action::ListTools, t).allowed();
                let scope = search_tool::Scope {
                    user,
                    allowed: &allowed,
                    failures_shown: self.team.is_none(),
                };
                let reply = self.search.search_for(&self.session, query, &scope).await;
                // Servers whose tools only the user's own sign-in can bring: asked once.
                if let Some(team) = &self.team {
                    let wanted = self.sign_ins_wanted(team, caller).await;
                    if !wanted.is_empty() {
                        return self.sign_in_needed(team, caller, &wanted).await;
                    }
                }
                let names = reply.tools.iter().map(|t| t.name.clone()).collect();
                self.share_found(caller, names).await;
                if self.search.found_count(user) > before {
                    self.list_changed(tx).await;
                    // No listener, no receiver: nothing to tell.
                    let _ = self.grown.send(user.into());
                }
                Ok(text_result(&reply.text(), false))
            }
            CALL_TOOL => {
                let Some(target) = args.get("name").and_then(Value::as_str) else {
                    return Err(
                        (INVALID_PARAMS, "call_tool needs the name of a tool".into()).into(),
                    );
                };
                let inner = args.get("arguments").cloned().unwrap_or(json!({}));
                self.call_found(caller, target, inner, progress).await
            }
            other => self.call_found(caller, other, args, progress).await,
        }
    }

    /// Calls a tool a search returned; anything else is refused with what to do instead,
    /// so a client never calls a tool whose schema it has not seen.
    async fn call_found(
        &self,
        caller: &Caller,
        name: &str,
        args: Value,
        progress: Option<ProgressSink>,
    ) -> Reply {
        if let (Some(team), Caller::User(_)) = (&self.team, caller) {
            return self.call_as_user(team, caller, name, args, progress).await;
        }
        if !self.expose_all && !self.search.has_found("", name) {
            return Ok(text_result(
                &format!(
                    "no tool named {} has been found in this session: call tool_search first, then call one of the tools it returns",
                    crate::text::shown(name)
                ),
                true,
            ));
        }
        self.run_call(name, args, progress).await
    }

    /// Calls the tool through the session.
    async fn run_call(&self, name: &str, args: Value, progress: Option<ProgressSink>) -> Reply {
        run_call_in(&self.session, name, args, progress).await
    }
}

/// Calls the tool through `session`; every outcome is a tool result, but the server
/// needing what the client did not declare, which fails the request (-32021, with the
/// capability in its `data`: see [`Refused::missing`]).
async fn run_call_in(
    session: &Session,
    name: &str,
    args: Value,
    progress: Option<ProgressSink>,
) -> Reply {
    reply_of(call_in(session, name, args, progress).await)
}

/// Calls the tool through `session`, with the client's progress token if it gave one.
pub(super) async fn call_in(
    session: &Session,
    name: &str,
    args: Value,
    progress: Option<ProgressSink>,
) -> Result<crate::guard::ToolOutput, McpError> {
    let call = session.call(name, args);
    match progress {
        Some(sink) => PROGRESS.scope(sink, call).await,
        None => call.await,
    }
}

/// A call's outcome as the client is answered (see [`run_call_in`]).
pub(super) fn reply_of(called: Result<crate::guard::ToolOutput, McpError>) -> Reply {
    match called {
        Ok(out) => Ok(serde_json::to_value(&out).unwrap_or_else(|e| {
            text_result(&format!("edgar could not encode the result: {e}"), true)
        })),
        Err(McpError::MissingCapability { capability, .. }) => Err(Refused::missing(capability)),
        // A call its upstream made a task for a client that takes tasks fails as the
        // task: that client reads `failed` and the error, not a tool result.
        Err(e) if crate::mcp::task::escalated() => {
            let code = match &e {
                McpError::Server { code, .. } => *code,
                _ => protocol::INTERNAL_ERROR,
            };
            Err((code, failure(&e)).into())
        }
        Err(e) => Ok(text_result(&failure(&e), true)),
    }
}

/// Passes an upstream call's progress to the client under the token it chose. Progress
/// is lossy: when the client reads slower than the server reports, updates are dropped.
pub(super) fn progress_sink(token: Value, tx: mpsc::Sender<Vec<u8>>) -> ProgressSink {
    Arc::new(move |mut update: Value| {
        update["progressToken"] = token.clone();
        let _ = tx.try_send(protocol::notification("notifications/progress", update));
    })
}

/// Passes an upstream server's log messages (checked by the connection) to the client,
/// those at least as severe as `least` when it is set (a team user's own level).
/// Lossy like progress: a client that reads slower than the server logs misses some.
pub(super) fn log_sink(tx: mpsc::Sender<Vec<u8>>, least: Option<u8>) -> LogSink {
    Arc::new(move |message: Value| {
        let severity = message["level"].as_str().and_then(protocol::log_severity);
        if let (Some(least), Some(severity)) = (least, severity)
            && severity < least
        {
            return;
        }
        let _ = tx.try_send(protocol::notification("notifications/message", message));
    })
}

/// An upstream failure as the client's model reads it (a tool error, not a protocol
/// error, so the model sees the reason and what to run).
fn failure(e: &McpError) -> String {
    crate::text::shown_message(&e.to_string())
}

pub(super) fn text_result(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_level_keeps_only_messages_at_least_as_severe() {
        let (tx, mut rx) = mpsc::channel(8);
        let sink = log_sink(tx.clone(), protocol::log_severity("warning"));
        for level in ["debug", "info", "warning", "error", "odd"] {
            sink(json!({"level": level, "data": level}));
        }
        let mut got = Vec::new();
        while let Ok(m) = rx.try_recv() {
            let m: Value = serde_json::from_slice(&m).unwrap_or_default();
            got.push(m["params"]["data"].as_str().unwrap_or_default().to_owned());
        }
        // A level the filter cannot place is passed on rather than lost.
        assert_eq!(got, ["warning", "error", "odd"]);
        // With no level set, everything.
        let all = log_sink(tx, None);
        all(json!({"level": "debug", "data": "d"}));
        assert!(rx.try_recv().is_ok());
    }
}
