//! A server's resources (`resources/list`, `resources/templates/list`,
//! `resources/read`): descriptors through the guard's `context` and findings (one a
//! finding flags is not listed), contents converted by the guard as embedded resources
//! of a tool result are, and a read in the audit trail (never its contents).

use serde::Serialize;
use serde_json::{Value, json};

use crate::guard::ContentBlock;
use crate::guard::context::{ContextKind, Guarded, well_formed_uri};
use crate::mcp::McpError;
use crate::text::shown;

use super::SessionInner;
use super::content::MAX_ITEMS;

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
        let items = self.paged(s, "resources/list", "resources").await?;
        let mut out = self.listed(s, ContextKind::Resource, &items).await?;
        match self
            .paged(s, "resources/templates/list", "resourceTemplates")
            .await
        {
            Ok(items) => out.extend(self.listed(s, ContextKind::Template, &items).await?),
            Err(McpError::Server { .. }) => {}
            Err(e) => return Err(e),
        }
        out.truncate(MAX_ITEMS);
        Ok(out)
    }

    /// One list's items through the guard; those its findings flag are left out, said
    /// in the log and audited.
    async fn listed(
        &self,
        s: &super::Server,
        kind: ContextKind,
        items: &[Value],
    ) -> Result<Vec<Resource>, McpError> {
        let accepted = self.accepted(s, kind, items).await?;
        let server = s.spec.name.as_str();
        let mut out = Vec::with_capacity(accepted.items.len());
        for g in accepted.items {
            let Guarded::Resource(r) = g else { continue };
            // The administrator's resource rules: what they refuse is not listed.
            if s.spec.tool_policy.resources.check(server, &r.uri).is_err() {
                continue;
            }
            if let Some(f) = accepted.flagged.get(&r.uri) {
                tracing::warn!(
                    server,
                    "resource {} not listed: the guard found {f}",
                    shown(&r.uri)
                );
                if let Some(audit) = &self.opts.audit {
                    audit.note(
                        "quarantine",
                        json!({"server": server, "resource_sha256": audit.digest(r.uri.as_bytes()),
                               "change": format!("the guard found {f}")}),
                    );
                }
                continue;
            }
            out.push(Resource {
                server: server.to_owned(),
                uri: r.uri,
                name: r.name,
                title: r.title,
                description: r.description,
                mime_type: r.mime_type,
                size: r.size,
                template: kind == ContextKind::Template,
            });
        }
        Ok(out)
    }

    /// Reads `uri` from `server`: its contents as content blocks (embedded resources,
    /// converted and screened by the guard as a tool result's are).
    pub async fn read(&self, server: &str, uri: &str) -> Result<Vec<ContentBlock>, McpError> {
        let s = self.server(server)?;
        well_formed_uri(uri).map_err(|reason| McpError::NotOffered {
            server: server.to_owned(),
            what: format!("resource at that address: {reason}"),
        })?;
        if let Err(list) = s.spec.tool_policy.resources.check(server, uri) {
            return Err(McpError::Blocked {
                server: server.to_owned(),
                rule: format!("{list}_resources"),
            });
        }
        let uri = uri.to_owned();
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
