//! The protocol's small requests a gateway passes on for one server: completion
//! (`completion/complete`, its values checked), and those answered with an empty
//! acknowledgement (`logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`;
//! a stateless server, which has no subscribe, watches a resource on a listen stream).
//! Nothing else is passed on by name.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::mcp::McpError;

use super::{Running, SessionInner};
use crate::sync::lock;

/// Resources one running server is asked to watch at most (one listen stream each).
const MAX_WATCHED: usize = 64;
/// Completion values kept at most (the protocol's own limit per response).
const MAX_VALUES: usize = 100;
/// Longest completion value kept (bytes).
const MAX_VALUE: usize = 1024;

/// The requests [`SessionInner::acknowledge`] passes on.
pub const ACKNOWLEDGED: [&str; 3] = [
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

impl SessionInner {
    /// `completion/complete` at `server` with `params` as the client sent them: the
    /// values it offers, strings only, at most 100 of at most 1 KiB, invisible characters
    /// shown.
    pub async fn complete(&self, server: &str, params: Value) -> Result<Value, McpError> {
        let s = self.server(server)?;
        let running = self.start(s).await?;
        let answer = running
            .conn
            .request("completion/complete", params, s.spec.tool_timeout)
            .await?;
        let c = &answer["completion"];
        let Some(values) = c["values"].as_array() else {
            return Err(McpError::Protocol {
                server: server.to_owned(),
                reason: "its completion has no values".into(),
            });
        };
        let values: Vec<String> = values
            .iter()
            .filter_map(Value::as_str)
            .filter(|v| v.len() <= MAX_VALUE)
            .take(MAX_VALUES)
            .map(crate::text::visible)
            .collect();
        let mut completion = json!({"values": values});
        if let Some(total) = c["total"].as_u64() {
            completion["total"] = json!(total);
        }
        if let Some(more) = c["hasMore"].as_bool() {
            completion["hasMore"] = json!(more);
        }
        Ok(json!({"completion": completion}))
    }

    /// One of [`ACKNOWLEDGED`] at `server`; its answer is only acknowledged.
    pub async fn acknowledge(
        &self,
        server: &str,
        method: &str,
        params: Value,
    ) -> Result<(), McpError> {
        if !ACKNOWLEDGED.contains(&method) {
            return Err(McpError::NotOffered {
                server: server.to_owned(),
                what: format!("{} through edgar", crate::text::shown(method)),
            });
        }
        let s = self.server(server)?;
        let running = self.start(s).await?;
        // The stateless era subscribes on a listen stream: one per URI, kept open
        // until the unsubscribe (or the connection's end).
        if running.conn.modern_version().is_some()
            && method != "logging/setLevel"
            && let Some(uri) = params.get("uri").and_then(Value::as_str)
        {
            self.watch(server, &running, uri, method == "resources/subscribe");
            return Ok(());
        }
        running
            .conn
            .request(method, params, s.spec.tool_timeout)
            .await?;
        Ok(())
    }

    /// Opens (`on`) or ends the listen stream on which a stateless `server` tells of
    /// changes to the resource at `uri`.
    fn watch(&self, server: &str, running: &Arc<Running>, uri: &str, on: bool) {
        let mut watched = lock(&running.watched);
        if !on {
            if let Some(listen) = watched.remove(uri) {
                listen.abort();
            }
            return;
        }
        if watched.contains_key(uri) || watched.len() >= MAX_WATCHED {
            return;
        }
        let (r, asked, server) = (running.clone(), uri.to_owned(), server.to_owned());
        let listen = tokio::spawn(async move {
            let params = json!({"notifications": {"resourceSubscriptions": [asked]}});
            let ended = r
                .conn
                .request("subscriptions/listen", params, super::refresh::LISTEN_FOR)
                .await;
            if let Err(e) = ended {
                tracing::debug!(server, "a resource subscription ended: {e}");
            }
        });
        watched.insert(uri.to_owned(), listen.abort_handle());
        lock(&self.background).push(listen.abort_handle());
    }
}
