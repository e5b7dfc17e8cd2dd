//! The protocol's small requests a gateway passes on for one server: completion
//! (`completion/complete`, its values checked), and those answered with an empty
//! acknowledgement (`logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`;
//! a stateless server, which has no subscribe, watches a resource on a listen stream).
//! Nothing else is passed on by name.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

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
        // until the unsubscribe (or the connection's end), and in place once the
        // server acknowledged it.
        if running.conn.modern_version().is_some()
            && method != "logging/setLevel"
            && let Some(uri) = params.get("uri").and_then(Value::as_str)
        {
            if method == "resources/subscribe" {
                return self.watch(server, &running, uri, s.spec.tool_timeout).await;
            }
            if let Some(listen) = lock(&running.watched).remove(uri) {
                listen.abort();
            }
            return Ok(());
        }
        running
            .conn
            .request(method, params, s.spec.tool_timeout)
            .await?;
        Ok(())
    }

    /// Opens the listen stream on which a stateless `server` tells of changes to the
    /// resource at `uri`, and waits (at most `wait`) for the server to acknowledge it:
    /// a stream it ends or refuses, or does not acknowledge in time, is no
    /// subscription.
    async fn watch(
        &self,
        server: &str,
        running: &Arc<Running>,
        uri: &str,
        wait: Duration,
    ) -> Result<(), McpError> {
        let (acked_tx, acked) = oneshot::channel();
        let (failed_tx, failed) = oneshot::channel();
        let id = {
            let mut watched = lock(&running.watched);
            if watched.contains_key(uri) {
                return Ok(());
            }
            if watched.len() >= MAX_WATCHED {
                return Err(McpError::NotOffered {
                    server: server.to_owned(),
                    what: format!("watching more than {MAX_WATCHED} resources"),
                });
            }
            let (r, asked, server) = (running.clone(), uri.to_owned(), server.to_owned());
            let listen = tokio::spawn(async move {
                let params = json!({"notifications": {"resourceSubscriptions": [&asked]}});
                let ended = r.conn.listen(params, super::refresh::LISTEN_FOR, acked_tx);
                let ended = ended.await;
                // An ended stream watches nothing: the URI may be subscribed again.
                unwatch(&r, &asked, tokio::task::id());
                if let Err(e) = ended {
                    tracing::debug!(server, "a resource subscription ended: {e}");
                    let _ = failed_tx.send(e);
                }
            });
            watched.insert(uri.to_owned(), listen.abort_handle());
            self.keep(listen.abort_handle());
            listen.id()
        };
        let acknowledged = async {
            if acked.await.is_ok() {
                return Ok(());
            }
            // The stream ended first: its error, or its answer, which ends it.
            Err(failed.await.unwrap_or_else(|_| McpError::Protocol {
                server: server.to_owned(),
                reason: "it ended a resource subscription before acknowledging it".into(),
            }))
        };
        let outcome = tokio::time::timeout(wait, acknowledged)
            .await
            .unwrap_or_else(|_| {
                Err(McpError::Timeout {
                    server: server.to_owned(),
                    method: "subscriptions/listen".into(),
                    timeout: wait,
                })
            });
        if outcome.is_err() {
            unwatch(running, uri, id);
        }
        outcome
    }
}

/// Ends the listen stream task `id` watching `uri` at `running`, and forgets it; one
/// that has since been replaced by a newer subscription is left alone.
fn unwatch(running: &Running, uri: &str, id: tokio::task::Id) {
    let mut watched = lock(&running.watched);
    if watched.get(uri).is_some_and(|h| h.id() == id)
        && let Some(listen) = watched.remove(uri)
    {
        listen.abort();
    }
}
