//! What prompts and resources share: lists read page by page within bounds, the
//! descriptors' words checked by the host, and contents (a prompt's messages, a
//! resource's text or bytes) converted by the server's adapter exactly as a tool result
//! is (`to-result`: block checks, sizes, media types) and screened for findings.

use serde_json::{Value, json};

use crate::guard::{Adapter, AdapterSource, ToolOutput};
use crate::mcp::McpError;
use crate::text::shown;

use super::{Server, SessionInner, run_guard};

/// Pages of one list read at most (a server that keeps answering with a cursor stops here).
const MAX_PAGES: usize = 64;
/// Items of one list kept at most.
pub(super) const MAX_ITEMS: usize = 4096;
/// Longest name or title kept (bytes); a longer name refuses the item.
pub(super) const MAX_NAME: usize = 256;
/// Longest description kept (bytes); a longer one is cut, with a marker.
const MAX_DESCRIPTION: usize = 8 << 10;
/// Longest URI (bytes).
pub(super) const MAX_URI: usize = 2048;

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

/// A name or title from a server: a string of at most [`MAX_NAME`] bytes with no control
/// characters, else `None`.
pub(super) fn name(v: Option<&Value>) -> Option<String> {
    let s = v?.as_str()?;
    (!s.is_empty() && s.len() <= MAX_NAME && !s.chars().any(char::is_control)).then(|| s.to_owned())
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

/// A URI from a server: a scheme, then no whitespace or control characters, at most
/// [`MAX_URI`] bytes.
pub(super) fn uri(v: Option<&Value>) -> Result<String, String> {
    let s = v.and_then(Value::as_str).ok_or("no uri")?;
    let scheme_ok = s.split_once(':').is_some_and(|(scheme, _)| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    if s.len() > MAX_URI {
        return Err(format!("a uri of {} bytes", s.len()));
    }
    if !scheme_ok || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("the uri {} is not well-formed", shown(s)));
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_words_are_bounded_and_visible() {
        assert_eq!(name(Some(&json!("greet"))), Some("greet".into()));
        for bad in [json!(""), json!("a\nb"), json!(7), json!("x".repeat(300))] {
            assert_eq!(name(Some(&bad)), None, "{bad}");
        }
        assert_eq!(name(None), None);
        let long = description(Some(&json!("é".repeat(5000))));
        assert!(
            long.len() < 8300 && long.ends_with("more bytes cut]"),
            "{long}"
        );
        assert_eq!(description(Some(&json!("a\u{200b}b"))), "a\\u{200b}b");
        for ok in [
            "file:///tmp/x",
            "test://static/resource/1",
            "https://a.example/b?c",
        ] {
            assert!(uri(Some(&json!(ok))).is_ok(), "{ok}");
        }
        for bad in [
            json!("no-scheme"),
            json!("1x://a"),
            json!("a b://c"),
            json!("file:///a b"),
            json!("x://a\u{0}"),
            json!(format!("x://{}", "a".repeat(3000))),
            json!(3),
        ] {
            assert!(uri(Some(&bad)).is_err(), "{bad}");
        }
    }
}
