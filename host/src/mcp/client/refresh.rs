//! Refresh and reset: a human's reset and refresh, and a running server's own word that
//! its tools changed (`notifications/tools/list_changed`, or the stateless era's
//! `subscriptions/listen`), which re-lists, re-guards and re-pins them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};

use crate::guard::SanitizedTool;
use crate::mcp::McpError;
use crate::mcp::cache::{Entry, now};

use super::discovery::{fresh_until, guard_tools, list_tools, pin_tools};
use super::{Running, Server, SessionInner, State, offered};

/// Least time between two refreshes after `notifications/tools/list_changed`: a server
/// that says so in a loop gets one refresh a second, not one per message.
pub(super) const LIST_CHANGED_MIN_INTERVAL: Duration = Duration::from_secs(1);

/// How long one `subscriptions/listen` may stay open: as long as the session, in effect.
pub(super) const LISTEN_FOR: Duration = Duration::from_secs(365 * 86_400);

/// Subscriptions opened for one connection before edgar stops asking, and the wait
/// before each new one (times the attempt).
pub(super) const LISTEN_ATTEMPTS: u32 = 5;

pub(super) const LISTEN_RETRY: Duration = Duration::from_secs(1);

impl SessionInner {
    /// Forgets the server's cache and failure, closes it if running, and discovers again.
    pub async fn refresh(&self, name: &str) -> Result<Arc<Vec<SanitizedTool>>, McpError> {
        self.reset(name).await?;
        let server = self.server(name)?;
        self.cache.remove(&server.spec);
        server.set_cached(None);
        self.start(server)
            .await
            .map(|r| offered(&server.spec, r.tools()))
    }

    /// A human's reset: the server is no longer failed and starts again when needed.
    pub async fn reset(&self, name: &str) -> Result<(), McpError> {
        let server = self.server(name)?;
        let mut state = server.state.lock().await;
        if let State::Running(r) = std::mem::replace(&mut *state, State::Idle) {
            r.transport.lock().await.close().await;
        }
        self.cache.clear_failure(&server.spec);
        server.set_cached(None);
        Ok(())
    }

    /// Someone signed in to `name` (a server a team gateway's users sign in to
    /// themselves): a search that could not include it tries it again.
    pub fn signed_in(&self, name: &str) {
        if let Ok(server) = self.server(name) {
            server.generation.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Stateless era: asks a running server to say when its tools change
    /// (`subscriptions/listen`), which feeds the same refresh as the handshake era's
    /// `notifications/tools/list_changed`. The subscription lives as long as the
    /// connection; one that breaks is opened again a few times, one the server does not
    /// offer is not.
    pub(super) fn listen_for_changes(&self, server: &str, running: &Arc<Running>) {
        let running = running.clone();
        let server = server.to_owned();
        let task = tokio::spawn(async move {
            let params = json!({"notifications": {"toolsListChanged": true,
                "promptsListChanged": true, "resourcesListChanged": true}});
            for attempt in 0..LISTEN_ATTEMPTS {
                if attempt > 0 {
                    tokio::time::sleep(LISTEN_RETRY * attempt).await;
                }
                let ended = running
                    .conn
                    .request("subscriptions/listen", params.clone(), LISTEN_FOR)
                    .await;
                match ended {
                    Ok(_) => tracing::debug!(server, "the server ended its subscription"),
                    Err(McpError::Closed { .. }) => return,
                    Err(e @ McpError::Server { .. }) => {
                        tracing::debug!(server, "no change subscription: {e}");
                        return;
                    }
                    Err(e) => tracing::debug!(server, "the change subscription broke: {e}"),
                }
            }
        });
        self.keep(task.abort_handle());
    }

    /// Refreshes a running server's tools whenever it says its list changed.
    pub(super) fn watch_list_changed(&self, server: &Server, running: &Arc<Running>) {
        let notify = running.conn.list_changed();
        let weak = Arc::downgrade(running);
        let spec = server.spec.clone();
        let cache = self.cache.clone();
        let digest = self.adapter_digest(server).ok();
        let guard = self.guard.clone();
        let generation = self.generation.clone();
        let changed = self.changed.clone();
        let pins = self.opts.pins.clone();
        let audit = self.opts.audit.clone();
        let quarantined = server.quarantined.clone();
        tokio::spawn(async move {
            let mut first = true;
            loop {
                if !first {
                    tokio::time::sleep(LIST_CHANGED_MIN_INTERVAL).await;
                }
                first = false;
                notify.notified().await;
                let Some(running) = weak.upgrade() else {
                    return;
                };
                if running.conn.closed_reason().is_some() {
                    return;
                }
                let source = spec.adapter.clone();
                let g = guard.clone();
                let adapter = match tokio::task::spawn_blocking(move || g.adapter(&source)).await {
                    Ok(Ok(a)) => a,
                    _ => continue,
                };
                // The notification makes a list still fresh by its TTL stale at once.
                let modern = running.conn.modern_version().is_some();
                let mut ttl_ms = 0;
                let refreshed =
                    match list_tools(&spec.name, &running.conn, spec.startup_timeout).await {
                        Ok((raw, ttl)) => {
                            ttl_ms = ttl;
                            guard_tools(&adapter, &spec, raw, audit.as_ref()).await
                        }
                        Err(e) => Err(e),
                    };
                let refreshed = refreshed.and_then(|(tools, refused, flagged)| {
                    let (tools, q) =
                        pin_tools(pins.as_deref(), audit.as_ref(), &spec, tools, &flagged)?;
                    Ok((tools, refused, q))
                });
                match refreshed {
                    Ok((tools, refused, q)) => {
                        *quarantined.write().unwrap_or_else(|p| p.into_inner()) =
                            Arc::new(q.clone());
                        tracing::info!(
                            server = spec.name,
                            tools = tools.len(),
                            "tool list changed; refreshed"
                        );
                        *running.tools.write().unwrap_or_else(|p| p.into_inner()) =
                            Arc::new(tools.clone());
                        generation.fetch_add(1, Ordering::SeqCst);
                        // Nobody listening: nothing to tell.
                        let _ = changed.send(spec.name.as_str().into());
                        if let Some(d) = &digest {
                            cache.remove(&spec);
                            let entry = Entry {
                                tools,
                                refused,
                                quarantined: q,
                                protocol_version: cache
                                    .read_era(&spec)
                                    .map(|e| e.version)
                                    .unwrap_or_default(),
                                server_info: Value::Null,
                                fetched_at: now(),
                                fresh_until_ms: fresh_until(modern, ttl_ms),
                            };
                            let _ = cache.write(&spec, d, &entry);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(server = spec.name, "refreshing the tool list failed: {e}")
                    }
                }
            }
        });
    }
}
