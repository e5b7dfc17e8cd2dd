//! A server's resources (`resources/list`, `resources/templates/list`,
//! `resources/read`): descriptors checked by the host, contents converted by the guard
//! as embedded resources of a tool result are, and a read in the audit trail (never its
//! contents).

use serde::Serialize;
use serde_json::{Value, json};

use crate::guard::ContentBlock;
use crate::mcp::McpError;
use crate::text::shown;

use super::SessionInner;
use super::content::{self, MAX_ITEMS};

/// Contents of one read kept at most.
const MAX_CONTENTS: usize = 256;

/// One resource (or resource template) a server offers, as the host checked it.
#[derive(Debug, Clone, Serialize)]
pub struct Resource {
    pub server: String,
    /// Its URI, or for a template its URI template (RFC 6570).
    pub uri: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// A template (`resources/templates/list`), read by filling in its variables.
    pub template: bool,
}

impl SessionInner {
    /// The resources and resource templates `server` offers (starting it if needed).
    /// A server without templates (the method unknown to it) lists resources only.
    pub async fn resources(&self, server: &str) -> Result<Vec<Resource>, McpError> {
        let s = self.server(server)?;
        let mut out = Vec::new();
        for item in self.paged(s, "resources/list", "resources").await? {
            match resource(server, &item, false) {
                Ok(r) => out.push(r),
                Err(why) => tracing::warn!(server, "a resource was left out: {why}"),
            }
        }
        match self
            .paged(s, "resources/templates/list", "resourceTemplates")
            .await
        {
            Ok(items) => {
                for item in items {
                    match resource(server, &item, true) {
                        Ok(r) => out.push(r),
                        Err(why) => {
                            tracing::warn!(server, "a resource template was left out: {why}")
                        }
                    }
                }
            }
            Err(McpError::Server { .. }) => {}
            Err(e) => return Err(e),
        }
        out.truncate(MAX_ITEMS);
        Ok(out)
    }

    /// Reads `uri` from `server`: its contents as content blocks (embedded resources,
    /// converted and screened by the guard as a tool result's are).
    pub async fn read(&self, server: &str, uri: &str) -> Result<Vec<ContentBlock>, McpError> {
        let s = self.server(server)?;
        let uri = content::uri(Some(&json!(uri))).map_err(|reason| McpError::NotOffered {
            server: server.to_owned(),
            what: format!("resource at that address: {reason}"),
        })?;
        let running = self.start(s).await?;
        let raw = running
            .conn
            .request_raw("resources/read", json!({"uri": uri}), s.spec.tool_timeout)
            .await?;
        let protocol = |reason: String| McpError::Protocol {
            server: server.to_owned(),
            reason,
        };
        let answer: Value = serde_json::from_str(raw.get()).map_err(|e| {
            protocol(format!(
                "its contents of {} do not decode ({e})",
                shown(&uri)
            ))
        })?;
        let Some(contents) = answer.get("contents").and_then(Value::as_array) else {
            return Err(protocol(format!(
                "its answer for {} has no contents",
                shown(&uri)
            )));
        };
        if contents.len() > MAX_CONTENTS {
            return Err(protocol(format!(
                "its answer for {} has {} contents, over {MAX_CONTENTS}",
                shown(&uri),
                contents.len()
            )));
        }
        // Each one as the embedded resource of a tool result: the guard checks its URI,
        // media type, text and base64 exactly as it does there.
        let blocks: Vec<Value> = contents
            .iter()
            .map(|c| json!({"type": "resource", "resource": c}))
            .collect();
        let out = self
            .guarded(
                s,
                &format!("resource {uri}"),
                json!({"content": blocks}).to_string(),
            )
            .await?;
        if let Some(audit) = &self.opts.audit {
            audit.note(
                "resource_read",
                json!({"server": server, "uri_sha256": audit.digest(uri.as_bytes()),
                       "contents": out.content.len(), "bytes": raw.get().len()}),
            );
        }
        Ok(out.content)
    }
}

/// One `resources/list` (or templates) item, checked.
fn resource(server: &str, item: &Value, template: bool) -> Result<Resource, String> {
    let key = if template { "uriTemplate" } else { "uri" };
    let uri = content::uri(item.get(key))?;
    let name = content::name(item.get("name"))
        .ok_or_else(|| format!("{} has no usable name", shown(&uri)))?;
    let mime_type = item
        .get("mimeType")
        .and_then(Value::as_str)
        .filter(|m| {
            m.len() <= 127
                && m.contains('/')
                && m.bytes()
                    .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\\'))
        })
        .map(str::to_owned);
    Ok(Resource {
        server: server.to_owned(),
        uri,
        name,
        title: content::name(item.get("title")),
        description: content::description(item.get("description")),
        mime_type,
        size: item.get("size").and_then(Value::as_u64),
        template,
    })
}
