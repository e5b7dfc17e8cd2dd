//! A server's prompts (`prompts/list`, `prompts/get`): descriptors through the guard's
//! `context` and findings, pinned (a changed prompt is held back until approved), each
//! message's content through the guard as a tool result's is, and a get in the audit
//! trail (never its argument values or text).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use crate::guard::ContentBlock;
use crate::guard::context::{ContextKind, Guarded};
use crate::mcp::McpError;
use crate::text::shown;

use super::SessionInner;
use super::content;
use crate::sync::lock;

/// Messages of one prompt kept at most.
const MAX_MESSAGES: usize = 256;

/// How long a checked prompt list answers a `prompts/get` without listing again: a
/// client lists, then gets, and the list it got was checked moments ago. The server
/// saying its prompts changed, or its restart, ends it sooner; a server that changes
/// a prompt without saying so is seen at the next list, or after this.
const LIST_FRESH: Duration = Duration::from_secs(30);

/// A server's prompts as last checked: those offered and those held back.
pub(super) struct Checked {
    listed: Vec<Prompt>,
    held: Vec<crate::trust::pins::Quarantined>,
}

/// The last checked list of a running server, when, and at which of its prompt-list
/// changes.
pub(super) struct Kept {
    at: Instant,
    changes: u64,
    checked: Arc<Checked>,
}

/// One prompt a server offers, as the host checked it.
#[derive(Debug, Clone, Serialize)]
pub struct Prompt {
    pub server: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    pub arguments: Vec<PromptArgument>,
}

pub use crate::guard::context::PromptArgument;

/// A prompt's messages, each through the guard.
#[derive(Debug, Clone, Serialize)]
pub struct PromptOutput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub messages: Vec<PromptMessage>,
}

/// One message: its role (`user` or `assistant`) and its content.
#[derive(Debug, Clone, Serialize)]
pub struct PromptMessage {
    pub role: String,
    pub content: Vec<ContentBlock>,
}

impl SessionInner {
    /// The prompts `server` offers (starting it if needed). One the host cannot read (no
    /// usable name, a duplicate) is left out and said in the log; one that differs from
    /// its pin, or is new since the first listing, is held back until `edgar mcp approve`.
    pub async fn prompts(&self, server: &str) -> Result<Vec<Prompt>, McpError> {
        Ok(self.prompts_checked(server).await?.listed.clone())
    }

    /// The checked list kept from a moment ago, if still good.
    async fn prompts_kept(&self, server: &str) -> Option<Arc<Checked>> {
        let running = self.start(self.server(server).ok()?).await.ok()?;
        let kept = lock(&running.prompts);
        kept.as_ref()
            .filter(|k| k.at.elapsed() < LIST_FRESH && k.changes == running.conn.prompt_changes())
            .map(|k| k.checked.clone())
    }

    /// The prompts that pass their pins, and those held back.
    async fn prompts_checked(&self, server: &str) -> Result<Arc<Checked>, McpError> {
        let s = self.server(server)?;
        let running = self.start(s).await?;
        // Read first: a change heard while listing makes what is kept stale at once.
        let changes = running.conn.prompt_changes();
        let (listed, held) = self.prompts_listed(server).await?;
        let checked = Arc::new(Checked { listed, held });
        *lock(&running.prompts) = Some(Kept {
            at: Instant::now(),
            changes,
            checked: checked.clone(),
        });
        Ok(checked)
    }

    /// Lists and checks the prompts of `server`: those that pass their pins, and those
    /// held back.
    async fn prompts_listed(
        &self,
        server: &str,
    ) -> Result<(Vec<Prompt>, Vec<crate::trust::pins::Quarantined>), McpError> {
        let s = self.server(server)?;
        let items = self.paged(s, "prompts/list", "prompts").await?;
        let accepted = self.accepted(s, ContextKind::Prompt, &items).await?;
        let mut out: Vec<Prompt> = accepted
            .items
            .into_iter()
            .filter_map(|g| match g {
                Guarded::Prompt(p) => Some(Prompt {
                    server: server.to_owned(),
                    name: p.name,
                    title: p.title,
                    description: p.description,
                    arguments: p.arguments,
                }),
                Guarded::Resource(_) => None,
            })
            .collect();
        let flagged = accepted.flagged;
        // The administrator's prompt rules: what they refuse is not offered at all.
        out.retain(|p| s.spec.tool_policy.prompts.check(server, &p.name).is_ok());
        let Some(pins) = &self.opts.pins else {
            // No human can approve anything: a flagged prompt is simply held back.
            let (out, held): (Vec<Prompt>, Vec<Prompt>) = out
                .into_iter()
                .partition(|p| !flagged.contains_key(&p.name));
            let held = held
                .into_iter()
                .map(|p| crate::trust::pins::Quarantined {
                    change: format!(
                        "the guard found {}",
                        flagged.get(&p.name).map(String::as_str).unwrap_or_default()
                    ),
                    tool: p.name.clone(),
                    name: p.name,
                })
                .collect();
            return Ok((out, held));
        };
        let views: Vec<(String, Value)> = out.iter().map(|p| (p.name.clone(), view(p))).collect();
        let now = crate::clock::now();
        let (passed, held) = pins
            .check_prompts(&s.spec, &views, now, &flagged)
            .map_err(|e| McpError::Start {
                server: server.to_owned(),
                reason: e.to_string(),
            })?;
        for q in &held {
            tracing::warn!(
                server,
                "prompt {} held back: {}; review it with `edgar mcp approve {server}`",
                shown(&q.name),
                q.change
            );
            if let Some(audit) = &self.opts.audit {
                audit.note(
                    "quarantine",
                    json!({"server": server, "prompt": q.name, "change": q.change}),
                );
            }
        }
        out.retain(|p| passed.contains(&p.name));
        Ok((out, held))
    }

    /// Gets prompt `name` of `server` with `arguments`: its messages, each converted by
    /// the server's adapter and screened. Only a prompt the server lists can be asked for.
    pub async fn prompt(
        &self,
        server: &str,
        name: &str,
        arguments: &BTreeMap<String, String>,
    ) -> Result<PromptOutput, McpError> {
        if let Err(list) = self
            .server(server)?
            .spec
            .tool_policy
            .prompts
            .check(server, name)
        {
            return Err(McpError::Blocked {
                server: server.to_owned(),
                rule: format!("{list}_prompts"),
            });
        }
        let checked = match self.prompts_kept(server).await {
            Some(kept) => kept,
            None => self.prompts_checked(server).await?,
        };
        let (listed, held) = (&checked.listed, &checked.held);
        if let Some(q) = held.iter().find(|q| q.name == name) {
            return Err(McpError::Quarantined {
                server: server.to_owned(),
                kind: "prompt",
                tool: name.to_owned(),
                change: q.change.clone(),
            });
        }
        let Some(p) = listed.iter().find(|p| p.name == name) else {
            return Err(McpError::NotOffered {
                server: server.to_owned(),
                what: format!(
                    "prompt {}; `edgar mcp prompts {server}` lists them",
                    shown(name)
                ),
            });
        };
        if let Some(missing) = p
            .arguments
            .iter()
            .find(|a| a.required && !arguments.contains_key(&a.name))
        {
            return Err(McpError::InvalidArguments {
                tool: format!("the prompt {server}/{name}"),
                errors: vec![format!("the argument {} is required", shown(&missing.name))],
                schema: serde_json::to_string(&p.arguments).unwrap_or_default(),
            });
        }
        let s = self.server(server)?;
        let running = self.start(s).await?;
        let (conn, timeout) = (&running.conn, s.spec.tool_timeout);
        // The stateless era: the server may ask the client for input first, as a tool may.
        let raw = crate::mcp::input::rounds(server, &self.opts.handler, |input| {
            let mut params = json!({"name": name, "arguments": arguments});
            if let Some((responses, state)) = input {
                if !responses.is_null() {
                    params["inputResponses"] = responses;
                }
                if let Some(state) = state {
                    params["requestState"] = Value::String(state);
                }
            }
            conn.request_raw("prompts/get", params, timeout)
        })
        .await?;
        let protocol = |reason: String| McpError::Protocol {
            server: server.to_owned(),
            reason,
        };
        let answer: Value = serde_json::from_str(raw.get())
            .map_err(|e| protocol(format!("its prompt {} does not decode ({e})", shown(name))))?;
        let Some(messages) = answer.get("messages").and_then(Value::as_array) else {
            return Err(protocol(format!(
                "its prompt {} has no messages",
                shown(name)
            )));
        };
        if messages.len() > MAX_MESSAGES {
            return Err(protocol(format!(
                "its prompt {} has {} messages, over {MAX_MESSAGES}",
                shown(name),
                messages.len()
            )));
        }
        let subject = format!("prompt {name}");
        let mut out = Vec::with_capacity(messages.len());
        for m in messages {
            let role = match m.get("role").and_then(Value::as_str) {
                Some(r @ ("user" | "assistant")) => r.to_owned(),
                _ => {
                    return Err(protocol(format!(
                        "its prompt {} has a message of no known role",
                        shown(name)
                    )));
                }
            };
            let block = m.get("content").cloned().unwrap_or(Value::Null);
            let guarded = self
                .guarded(s, &subject, json!({"content": [block]}).to_string())
                .await?;
            out.push(PromptMessage {
                role,
                content: guarded.content,
            });
        }
        if let Some(audit) = &self.opts.audit {
            audit.note(
                "prompt_get",
                json!({"server": server, "prompt": name, "arguments": arguments.len(),
                       "messages": out.len(), "bytes": raw.get().len()}),
            );
        }
        Ok(PromptOutput {
            description: answer
                .get("description")
                .filter(|d| d.is_string())
                .map(|d| content::description(Some(d))),
            messages: out,
        })
    }
}

/// What a client sees of a prompt: the part its pin covers.
fn view(p: &Prompt) -> Value {
    json!({"name": p.name, "title": p.title, "description": p.description,
           "arguments": p.arguments})
}
