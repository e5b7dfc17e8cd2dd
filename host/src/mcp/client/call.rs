//! Tool calls: finding the tool by the name the model sees, validating arguments against
//! its accepted schema, the round trip (both eras, input requests, tasks), the result
//! through the guard, and the call's line in the audit trail.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

use crate::config::{ServerSpec, Transport};
use crate::guard::{Adapter, AdapterSource, SanitizedTool, ToolOutput};
use crate::mcp::McpError;
use crate::mcp::input;
use crate::mcp::task::{self};
use crate::text::shown;
use crate::trust::audit::AuditLog;

use super::{Server, SessionInner, run_guard};
use crate::sync::lock;

/// Results up to this size go through the built-in adapter on the calling task.
pub(super) const INLINE_GUARD_BYTES: usize = 64 << 10;

/// Most validation errors reported for one call.
pub(super) const MAX_ARGUMENT_ERRORS: usize = 10;

/// What a tool call leaves in the audit trail (never argument values or results).
#[derive(Debug, Clone, Default)]
pub(super) struct CallRecord {
    server: String,
    tool: String,
    args_sha256: String,
    result_bytes: u64,
}

/// A call whose future is dropped before it ends (Ctrl-C, a gateway client's
/// cancellation, a shutdown) still leaves its line: it may have reached the server.
struct Unfinished<'a> {
    audit: Option<&'a AuditLog>,
    /// The server and tool, once the name is found.
    owner: &'a OnceLock<(String, String)>,
    name: &'a str,
    args_sha256: &'a str,
    started: std::time::Instant,
    armed: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        let Some(audit) = self.audit.filter(|_| self.armed) else {
            return;
        };
        let (server, tool) = self.owner.get().cloned().unwrap_or_default();
        audit.note(
            "call",
            json!({
                "server": server,
                "tool": tool,
                "name": self.name,
                "duration_ms": self.started.elapsed().as_millis() as u64,
                "args_sha256": self.args_sha256,
                "result_bytes": 0,
                "error": "cancelled",
            }),
        );
    }
}

impl SessionInner {
    /// Calls a tool by the name the model sees (or `server/tool`), validating the
    /// arguments against its accepted schema first and converting the result through
    /// the guard.
    pub async fn call(&self, name: &str, arguments: Value) -> Result<ToolOutput, McpError> {
        let started = std::time::Instant::now();
        // Keyed when the trail is (HMAC-SHA256), so a short argument cannot be recovered
        // by hashing guesses.
        let args_sha256 = self
            .opts
            .audit
            .as_ref()
            .map(|a| a.digest(arguments.to_string().as_bytes()))
            .unwrap_or_default();
        // A shared trail (a gateway's replicas) must hold a line before the call runs:
        // when it cannot be written, the call does not run.
        if let Some(audit) = self.opts.audit.as_ref().filter(|a| a.required()) {
            // Known to be down: refused at once rather than after the line's deadline.
            if let Some(why) = audit.unavailable() {
                return Err(McpError::Unaudited {
                    ran: false,
                    reason: format!("the audit trail cannot be written: {why}"),
                });
            }
            let begin = json!({"name": name, "args_sha256": args_sha256});
            audit
                .record_confirmed("call_begin", begin)
                .await
                .map_err(|e| McpError::Unaudited {
                    ran: false,
                    reason: e.to_string(),
                })?;
        }
        let owner = OnceLock::new();
        let mut unfinished = Unfinished {
            audit: self.opts.audit.as_ref(),
            owner: &owner,
            name,
            args_sha256: &args_sha256,
            started,
            armed: true,
        };
        let result = self
            .call_inner(name, arguments, args_sha256.clone(), &owner)
            .await;
        unfinished.armed = false;
        if let Some(audit) = &self.opts.audit {
            let (record, outcome) = result.as_ref().map_or_else(
                |e| (e.1.clone(), json!({"error": e.0.kind()})),
                |(out, r)| {
                    (
                        r.clone(),
                        json!({"is_error": out.is_error, "blocks": out.content.len()}),
                    )
                },
            );
            let mut fields = json!({
                "server": record.server,
                "tool": record.tool,
                "name": name,
                "duration_ms": started.elapsed().as_millis() as u64,
                "args_sha256": record.args_sha256,
                "result_bytes": record.result_bytes,
            });
            if let (Value::Object(f), Value::Object(o)) = (&mut fields, outcome) {
                f.extend(o);
            }
            if audit.required() {
                // What a client is told succeeded has its line: a result whose line
                // could not be written is withheld (the call ran; its `call_begin`
                // line says so).
                if let Err(e) = audit.record_confirmed("call", fields).await {
                    return Err(McpError::Unaudited {
                        ran: true,
                        reason: e.to_string(),
                    });
                }
            } else {
                audit.note("call", fields);
            }
        }
        result.map(|(out, _)| out).map_err(|e| e.0)
    }

    pub(super) async fn call_inner(
        &self,
        name: &str,
        arguments: Value,
        args_sha256: String,
        owner: &OnceLock<(String, String)>,
    ) -> Result<(ToolOutput, CallRecord), (McpError, CallRecord)> {
        let mut record = CallRecord {
            args_sha256,
            ..CallRecord::default()
        };
        let (list, index) = match self.find_tool(name).await {
            Ok(found) => found,
            Err(e) => {
                record.server = e.server().unwrap_or_default().to_owned();
                if let McpError::Quarantined {
                    kind: "tool", tool, ..
                } = &e
                {
                    record.tool = tool.clone();
                }
                return Err((e, record));
            }
        };
        let tool = &list[index];
        record.server = tool.server().to_owned();
        record.tool = tool.tool().to_owned();
        let _ = owner.set((record.server.clone(), record.tool.clone()));
        match self.call_found(tool, arguments, &mut record).await {
            Ok(out) => Ok((out, record)),
            Err(e) => Err((e, record)),
        }
    }

    pub(super) async fn call_found(
        &self,
        tool: &SanitizedTool,
        arguments: Value,
        record: &mut CallRecord,
    ) -> Result<ToolOutput, McpError> {
        let name = tool.name();
        let arguments = if arguments.is_null() {
            json!({})
        } else {
            crate::guard::provider::without_absent_nulls(tool.input_schema(), arguments)
        };
        self.validate(tool, &arguments)?;
        let server = self.server(tool.server())?;
        // A secret the model was talked into passing along is stopped before the call is
        // sent; most calls have no string long enough and cost nothing here.
        let strings = super::findings::argument_strings(&arguments);
        if !strings.is_empty() {
            let adapter = self.adapter(server).await?;
            let (spec, tool_name, name) = (
                server.spec.clone(),
                tool.tool().to_owned(),
                tool.name().to_owned(),
            );
            let audit = self.opts.audit.clone();
            run_guard(move || {
                super::findings::screen_arguments(
                    &adapter,
                    &spec,
                    &tool_name,
                    &name,
                    &strings,
                    audit.as_ref(),
                )
            })
            .await
            .map_err(|reason| McpError::Start {
                server: tool.server().to_owned(),
                reason,
            })??;
        }
        let running = self.start(server).await?;
        // What `offered` would list, without building the list.
        let offered = (!server.spec.filters_tools() || server.spec.allows(tool.tool()))
            && running.tools().iter().any(|t| t.tool() == tool.tool());
        if !offered {
            return Err(self.not_found(name));
        }
        // The result stays the text the server sent: the guard reads it as is.
        let sent = std::time::Instant::now();
        let (conn, timeout) = (&running.conn, server.spec.tool_timeout);
        let text = if conn.modern_version().is_none() {
            let params = json!({"name": tool.tool(), "arguments": arguments});
            conn.request_raw("tools/call", params, timeout).await?
        } else {
            // The stateless era: the server may answer with a request for input first.
            let headers = match &server.spec.transport {
                Transport::Http { .. } => {
                    crate::mcp::http::param_headers(tool.input_schema(), &arguments)
                }
                _ => Vec::new(),
            };
            input::rounds(tool.server(), &self.opts.handler, |input| {
                let mut params = json!({"name": tool.tool(), "arguments": arguments.clone()});
                if let Some((responses, state)) = input {
                    if !responses.is_null() {
                        params["inputResponses"] = responses;
                    }
                    if let Some(state) = state {
                        params["requestState"] = Value::String(state);
                    }
                }
                conn.request_with_headers("tools/call", params, timeout, headers.clone())
            })
            .await?
        };
        // The tasks extension: the server runs the call as a task; follow it to its end.
        let text = if conn.modern_version().is_some() && task::is_task(text.get()) {
            let follow = task::Follow {
                server: tool.server(),
                conn,
                handler: &self.opts.handler,
                tasks: &running.tasks,
                poll_timeout: timeout,
                deadline: server.spec.task_deadline,
            };
            follow.run(text.get()).await?
        } else {
            text
        };
        if !running.called.swap(true, Ordering::Relaxed) {
            self.note_first_call(&server.spec, sent.elapsed());
        }
        let adapter = self.adapter(server).await?;
        let (server_name, tool_name) = (tool.server().to_owned(), tool.tool().to_owned());
        record.result_bytes = text.get().len() as u64;
        if let Some(max) = server.spec.tool_policy.max_result_bytes
            && text.get().len() as u64 > max
        {
            return Err(McpError::Blocked {
                server: server_name,
                rule: format!(
                    "max_result_bytes (the result of {} has {} bytes; the limit is {max})",
                    tool.name(),
                    text.get().len()
                ),
            });
        }
        // The built-in adapter converts a small result in microseconds (its work is linear
        // in the input): inline is cheaper than any hand-off. Anything else runs off the
        // async workers, bounded by the guard's deadline.
        // Then its findings: secrets masked (or the call blocked) before the model reads it.
        let inline =
            server.spec.adapter == AdapterSource::Builtin && text.get().len() <= INLINE_GUARD_BYTES;
        let screen = adapter.scans().then(|| super::findings::Screen {
            actions: server.spec.tool_policy.findings,
            server: server_name.clone(),
            tool: tool_name.clone(),
            name: tool.name().to_owned(),
            audit: self.opts.audit.clone(),
        });
        let screen = move |adapter: &Adapter, out: ToolOutput| match &screen {
            Some(s) => s.apply(adapter, out),
            None => Ok(out),
        };
        if inline {
            let out = adapter.to_result(&server_name, &tool_name, text.get())?;
            return screen(&adapter, out);
        }
        run_guard(move || {
            let out = adapter.to_result(&server_name, &tool_name, text.get())?;
            screen(&adapter, out)
        })
        .await
        .map_err(|reason| McpError::Start {
            server: tool.server().to_owned(),
            reason,
        })?
    }

    /// The input schema edgar accepted for a tool (by model-visible name or
    /// `server/tool`), as a call checks its arguments against: for a caller that builds
    /// arguments from text. Starts the tool's server when its tools are not known.
    pub async fn input_schema(&self, name: &str) -> Result<Value, McpError> {
        let (list, index) = self.find_tool(name).await?;
        Ok(list[index].input_schema().clone())
    }

    /// The tool by model-visible name or `server/tool`, as its list and index (no clone).
    pub(super) async fn find_tool(
        &self,
        name: &str,
    ) -> Result<(Arc<Vec<SanitizedTool>>, usize), McpError> {
        if let Some((server, tool)) = name.split_once('/') {
            let tools = self.tools(server).await?;
            return match tools.iter().position(|t| t.tool() == tool) {
                Some(i) => Ok((tools, i)),
                None => Err(self.not_found(name)),
            };
        }
        // `server__tool` of a server that may not run: say why rather than search.
        if let Some((prefix, _)) = name.split_once("__")
            && !self.servers.iter().any(|s| s.spec.name == prefix)
            && let Some(e) = self.held_error(prefix)
        {
            return Err(e);
        }
        // Tools already in memory first: the common case reads nothing and clones one tool.
        for s in &self.servers {
            if let Some(list) = s.known_tools()
                && let Some(i) = list.iter().position(|t| t.name() == name)
            {
                return Ok((list, i));
            }
        }
        let find = |tools: Arc<Vec<SanitizedTool>>| {
            let i = tools.iter().position(|t| t.name() == name)?;
            Some((tools, i))
        };
        // A call starts only its own server. The guard lets no server's tool take a name
        // without that server's prefix (`check::prefixed`), so the owner is among the
        // servers the prefix names (several only for a hashed prefix): those with tools
        // at hand first, reading one cache entry, not every server's names. Only a name
        // no owner has falls back to the uncached rest.
        let mut owners: Vec<&Arc<Server>> = self
            .servers
            .iter()
            .filter(|s| crate::guard::check::prefixed(name, &s.spec.name).is_ok())
            .collect();
        owners.sort_by_cached_key(|s| self.needs_start(s));
        let mut owner_error = None;
        for s in &owners {
            match self.tools(&s.spec.name).await {
                Ok(tools) => {
                    if let Some(hit) = find(tools) {
                        return Ok(hit);
                    }
                }
                Err(e) => owner_error = owner_error.or(Some(e)),
            }
        }
        let catalog = self.catalog().await;
        if let Some(t) = catalog.tools.into_iter().find(|t| t.name() == name) {
            return Ok((Arc::new(vec![t]), 0));
        }
        if let Some(e) = owner_error {
            return Err(e);
        }
        match catalog.failures.into_iter().next() {
            Some(e) if self.servers.len() == 1 => Err(e),
            _ => Err(self.not_found(name)),
        }
    }

    /// Why `name` is not callable: quarantined, or unknown.
    pub(super) fn not_found(&self, name: &str) -> McpError {
        let (server, tool) = name.split_once('/').unwrap_or(("", name));
        for s in &self.servers {
            if !server.is_empty() && s.spec.name != server {
                continue;
            }
            if let Some(q) = s
                .quarantined()
                .iter()
                .find(|q| q.name == tool || (!server.is_empty() && q.tool == tool))
            {
                return McpError::Quarantined {
                    server: s.spec.name.clone(),
                    kind: "tool",
                    tool: q.tool.clone(),
                    change: q.change.clone(),
                };
            }
        }
        if !server.is_empty()
            && let Ok(s) = self.server(server)
            && !s.spec.tool_policy.allows(server, tool)
        {
            return McpError::Blocked {
                server: server.to_owned(),
                rule: format!("deny_tools or allow_tools (tool {})", shown(tool)),
            };
        }
        McpError::UnknownTool(name.to_owned())
    }

    /// Validates arguments with the tool's compiled schema, compiling it on the tool's
    /// first call only (compiling costs milliseconds; the catalog is never compiled whole).
    pub(super) fn validate(&self, tool: &SanitizedTool, args: &Value) -> Result<(), McpError> {
        let key = format!("{}\u{0}{}", tool.server(), tool.tool());
        let cached = self
            .validators
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        let validator = match cached {
            Some(v) => v,
            None => {
                let v = Arc::new(crate::guard::compile_schema(tool.input_schema()).map_err(
                    |reason| McpError::InvalidArguments {
                        tool: tool.name().to_owned(),
                        errors: vec![reason],
                        schema: tool.input_schema().to_string(),
                    },
                )?);
                lock(&self.validators).insert(key, v.clone());
                v
            }
        };
        let errors: Vec<String> = validator
            .iter_errors(args)
            .take(MAX_ARGUMENT_ERRORS)
            .map(|e| {
                let at = e.instance_path().to_string();
                format!(
                    "- at {}: {e}",
                    if at.is_empty() { "(top level)" } else { &at }
                )
            })
            .collect();
        if errors.is_empty() {
            return Ok(());
        }
        Err(McpError::InvalidArguments {
            tool: tool.name().to_owned(),
            errors,
            schema: tool.input_schema().to_string(),
        })
    }

    /// `tool`'s input schema lowered for `provider` by its server's adapter (loaded if
    /// needed; nothing is started).
    pub async fn lower(
        &self,
        tool: &SanitizedTool,
        provider: crate::guard::Provider,
    ) -> Result<crate::guard::LoweredTool, McpError> {
        let server = self.server(tool.server())?;
        let adapter = self.adapter(server).await?;
        let tool = tool.clone();
        let lowered = run_guard(move || adapter.lower_tools(&[&tool], provider).pop())
            .await
            .map_err(|reason| McpError::Start {
                server: server.spec.name.clone(),
                reason,
            })?;
        match lowered {
            Some(result) => result.map_err(McpError::from),
            None => Err(McpError::Start {
                server: server.spec.name.clone(),
                reason: "the guard returned no lowering".into(),
            }),
        }
    }

    pub(super) async fn adapter(&self, server: &Server) -> Result<Arc<Adapter>, McpError> {
        if let Some(adapter) = self.guard.loaded(&server.spec.adapter) {
            return Ok(adapter);
        }
        let guard = self.guard.clone();
        let source = server.spec.adapter.clone();
        tokio::task::spawn_blocking(move || guard.adapter(&source))
            .await
            .map_err(|e| McpError::Start {
                server: server.spec.name.clone(),
                reason: format!("the guard task failed: {e}"),
            })?
            .map_err(McpError::from)
    }

    /// Adds the session's first call latency to the server's last discovery timings.
    pub(super) fn note_first_call(&self, spec: &ServerSpec, took: Duration) {
        if let Some(mut t) = self.cache.read_timings(spec) {
            t.first_call_ms = Some(took.as_millis() as u64);
            self.cache.write_timings(spec, &t);
        }
    }
}
