//! What prompts and resources share: lists read page by page within bounds, each item
//! accepted by the guard's `context` (the server's adapter's, or the built-in one's for
//! an adapter without it) and its words screened for findings, and contents (a prompt's
//! messages, a resource's text or bytes) converted by the server's adapter exactly as a
//! tool result is (`to-result`: block checks, sizes, media types) and screened too.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::guard::context::{ContextKind, Guarded};
use crate::guard::findings::Finding;
use crate::guard::{Adapter, AdapterSource, GuardError, ToolOutput};
use crate::mcp::McpError;
use crate::text::shown;

use super::{Server, SessionInner, run_guard};

/// Pages of one list read at most (a server that keeps answering with a cursor stops here).
const MAX_PAGES: usize = 64;
/// Items of one list kept at most.
pub(super) const MAX_ITEMS: usize = 4096;
/// Longest description kept (bytes); a longer one is cut, with a marker.
const MAX_DESCRIPTION: usize = 8 << 10;

/// What one list's items came to: those accepted, by the server's own name or URI, and
/// the words of those whose findings say to hold them back (name -> the finding).
pub(super) struct Accepted {
    pub(super) items: Vec<Guarded>,
    pub(super) flagged: BTreeMap<String, String>,
}

impl SessionInner {
    /// Every item of a paginated list (`prompts/list`, `resources/list`, ...): the items
    /// under `key` of each page, following `nextCursor` within the bounds above.
    pub(super) async fn paged(
        &self,
        server: &Server,
        method: &str,
        key: &str,
    ) -> Result<Vec<Value>, McpError> {
        let running = self.start(server).await?;
        let timeout = server.spec.tool_timeout;
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = running.conn.request(method, params, timeout).await?;
            let protocol = |reason: String| McpError::Protocol {
                server: server.spec.name.clone(),
                reason,
            };
            match page.get(key) {
                Some(Value::Array(list)) => {
                    items.extend(list.iter().take(MAX_ITEMS - items.len()).cloned())
                }
                _ => {
                    return Err(protocol(format!(
                        "its answer to {method} has no {key} list"
                    )));
                }
            }
            cursor = match page.get("nextCursor") {
                Some(Value::String(c)) if !c.is_empty() && items.len() < MAX_ITEMS => {
                    Some(c.clone())
                }
                _ => return Ok(items),
            };
        }
        tracing::warn!(
            server = server.spec.name,
            "{method}: stopped after {MAX_PAGES} pages"
        );
        Ok(items)
    }

    /// Each item of one list of `kind` through the guard's `context` (the server's
    /// adapter when it has one, else the built-in adapter's: the reference behaviour),
    /// then its words through the server's adapter's findings. An item the guard refuses
    /// is left out and said in the log; one listed twice keeps the first.
    pub(super) async fn accepted(
        &self,
        server: &Server,
        kind: ContextKind,
        items: &[Value],
    ) -> Result<Accepted, McpError> {
        let own = self.adapter(server).await?;
        let context = if own.contextual() {
            own.clone()
        } else {
            self.loaded_adapter(&server.spec.name, &AdapterSource::Builtin)
                .await?
        };
        let texts: Vec<String> = items.iter().map(Value::to_string).collect();
        let name = server.spec.name.clone();
        let work = move || {
            let accepted = context.accept_context(&name, kind, &texts);
            let scans = own.scans().then(|| {
                accepted
                    .iter()
                    .filter_map(|a| a.as_ref().ok())
                    .map(|g| (key(g).to_owned(), scan_words(&own, &name, g)))
                    .collect::<Vec<_>>()
            });
            (accepted, scans)
        };
        let (accepted, scans) = if server.spec.adapter == AdapterSource::Builtin {
            work()
        } else {
            run_guard(work).await.map_err(|reason| McpError::Start {
                server: server.spec.name.clone(),
                reason,
            })?
        };
        let server_name = server.spec.name.as_str();
        let mut out: Vec<Guarded> = Vec::with_capacity(accepted.len());
        for a in accepted {
            match a {
                Ok(g) if out.iter().any(|o| key(o) == key(&g)) => tracing::warn!(
                    server = server_name,
                    "{} {} listed twice: the first kept",
                    noun(kind),
                    shown(key(&g))
                ),
                Ok(g) => out.push(g),
                Err(e) => tracing::warn!(server = server_name, "left out: {e}"),
            }
        }
        out.truncate(MAX_ITEMS);
        let flagged = match scans {
            Some(scans) => {
                super::findings::judge_as(&server.spec, noun(kind), scans, self.opts.audit.as_ref())
            }
            None => BTreeMap::new(),
        };
        Ok(Accepted {
            items: out,
            flagged,
        })
    }

    /// The adapter at `source`, loaded off the async threads the first time.
    async fn loaded_adapter(
        &self,
        server: &str,
        source: &AdapterSource,
    ) -> Result<Arc<Adapter>, McpError> {
        if let Some(adapter) = self.guard.loaded(source) {
            return Ok(adapter);
        }
        let (guard, source) = (self.guard.clone(), source.clone());
        tokio::task::spawn_blocking(move || guard.adapter(&source))
            .await
            .map_err(|e| McpError::Start {
                server: server.to_owned(),
                reason: format!("the guard task failed: {e}"),
            })?
            .map_err(McpError::from)
    }

    /// `content_json` (a `{"content": [...]}` object) through the server's adapter and
    /// then its findings, as a tool result is: `subject` names what it is in errors.
    pub(super) async fn guarded(
        &self,
        server: &Server,
        subject: &str,
        content_json: String,
    ) -> Result<ToolOutput, McpError> {
        let adapter = self.adapter(server).await?;
        if let Some(max) = server.spec.tool_policy.max_result_bytes
            && content_json.len() as u64 > max
        {
            return Err(McpError::Blocked {
                server: server.spec.name.clone(),
                rule: format!(
                    "max_result_bytes ({subject} has {} bytes; the limit is {max})",
                    content_json.len()
                ),
            });
        }
        let screen = adapter.scans().then(|| super::findings::Screen {
            actions: server.spec.tool_policy.findings,
            server: server.spec.name.clone(),
            tool: subject.to_owned(),
            name: subject.to_owned(),
            audit: self.opts.audit.clone(),
        });
        let (name, subject) = (server.spec.name.clone(), subject.to_owned());
        let convert = move |adapter: &Adapter| {
            let out = adapter.to_result(&name, &subject, &content_json)?;
            match &screen {
                Some(s) => s.apply(adapter, out),
                None => Ok(out),
            }
        };
        if server.spec.adapter == AdapterSource::Builtin {
            return convert(&adapter);
        }
        run_guard(move || convert(&adapter))
            .await
            .map_err(|reason| McpError::Start {
                server: server.spec.name.clone(),
                reason,
            })?
    }
}

/// The server's own name (a prompt) or URI (a resource) of an accepted item.
pub(super) fn key(g: &Guarded) -> &str {
    match g {
        Guarded::Prompt(p) => &p.name,
        Guarded::Resource(r) => &r.uri,
    }
}

fn noun(kind: ContextKind) -> &'static str {
    match kind {
        ContextKind::Prompt => "prompt",
        ContextKind::Resource | ContextKind::Template => "resource",
    }
}

/// The findings on an accepted item's words, as a reader would read them: its title,
/// description and (a prompt's) arguments' descriptions, or (a resource's) name.
fn scan_words(adapter: &Adapter, server: &str, g: &Guarded) -> Result<Vec<Finding>, GuardError> {
    let mut texts: Vec<&str> = Vec::new();
    match g {
        Guarded::Prompt(p) => {
            texts.extend(p.title.as_deref());
            texts.push(&p.description);
            texts.extend(p.arguments.iter().map(|a| a.description.as_str()));
        }
        Guarded::Resource(r) => {
            texts.push(&r.name);
            texts.extend(r.title.as_deref());
            texts.push(&r.description);
        }
    }
    texts.retain(|t| !t.is_empty());
    adapter.scan_texts(server, key(g), &texts)
}

/// A description from a server, cut at [`MAX_DESCRIPTION`] with a marker; invisible
/// characters are made visible (a reviewer reads what the model would).
pub(super) fn description(v: Option<&Value>) -> String {
    let s = v.and_then(Value::as_str).unwrap_or_default();
    let mut end = s.len().min(MAX_DESCRIPTION);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = crate::text::visible(&s[..end]);
    if end < s.len() {
        out.push_str(&format!(" [edgar: {} more bytes cut]", s.len() - end));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_bounded_and_visible() {
        let long = description(Some(&json!("é".repeat(5000))));
        assert!(
            long.len() < 8300 && long.ends_with("more bytes cut]"),
            "{long}"
        );
        assert_eq!(description(Some(&json!("a\u{200b}b"))), "a\\u{200b}b");
        assert_eq!(description(Some(&json!(7))), "");
    }
}
