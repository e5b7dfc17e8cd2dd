//! The catalog: the names the prompt carries and the tools a session knows, read from
//! the running server, the session's memory, the one-file index or each server's cache
//! entry, and discovered (bounded or not) only where none of those has them. A server
//! that failed recently is left alone unless named.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::guard::SanitizedTool;
use crate::guard::ToolName;
use crate::mcp::McpError;
use crate::mcp::cache::now;

use super::{
    Catalog, FAILURE_COOLDOWN, PromptNames, Server, Session, SessionInner, State, join_all, offered,
};

pub(super) fn dedupe_names(names: Vec<ToolName>) -> Vec<ToolName> {
    let mut seen = HashSet::new();
    names
        .into_iter()
        .filter(|n| seen.insert(n.name.clone()))
        .collect()
}

/// The names a session has without starting anything.
pub(super) enum AtHand {
    /// The whole configuration's index file.
    Index(Vec<ToolName>),
    /// Each server's live or cached names, the failures known, and the servers that
    /// have neither.
    Servers(Vec<ToolName>, Vec<McpError>, Vec<String>),
}

/// A catalog of `tools` where a name two servers produced keeps the first.
pub(super) fn unique(tools: Vec<SanitizedTool>, failures: Vec<McpError>) -> Catalog {
    let mut seen = HashSet::new();
    let tools = tools
        .into_iter()
        .filter(|t| {
            let fresh = seen.insert(t.name().to_owned());
            if !fresh {
                tracing::warn!(
                    server = t.server(),
                    "tool {} hidden: its name is taken by another server",
                    t.name()
                );
            }
            fresh
        })
        .collect();
    Catalog {
        tools,
        failures,
        pending: Vec::new(),
    }
}

impl Session {
    /// The names for the prompt, waiting at most `budget` for servers that must be
    /// discovered: cached names at once, the rest concurrently. A server not ready in
    /// time is `pending` and keeps starting in the background (and is cached when it is
    /// ready, for this session's searches and the next session's prompt).
    pub async fn tool_names_within(&self, budget: Duration) -> PromptNames {
        let (mut names, mut failures, missing) = match self.names_at_hand() {
            AtHand::Index(names) => {
                return PromptNames {
                    names,
                    ..PromptNames::default()
                };
            }
            AtHand::Servers(names, failures, missing) => (names, failures, missing),
        };
        if missing.is_empty() {
            let names = self.remember_index(names, &failures);
            return PromptNames {
                names,
                failures,
                pending: Vec::new(),
            };
        }
        let (found, more, pending) = self.discover_within(&missing, budget).await;
        names.extend(found.iter().map(SanitizedTool::names));
        failures.extend(more);
        PromptNames {
            names: dedupe_names(names),
            failures,
            pending,
        }
    }

    /// Every tool available within `budget`: as [`SessionInner::catalog`], but servers
    /// still starting when the budget runs out are `pending`, not waited for.
    pub async fn catalog_within(&self, budget: Duration) -> Catalog {
        let mut ready = Vec::new();
        let mut missing = Vec::new();
        for s in &self.servers {
            if self.needs_start(s) {
                missing.push(s.spec.name.clone());
            } else {
                ready.push(s.spec.name.clone());
            }
        }
        let (mut tools, mut failures) = self.discover_many(&ready).await;
        let (found, more, pending) = self.discover_within(&missing, budget).await;
        tools.extend(found);
        failures.extend(more);
        let mut catalog = unique(tools, failures);
        catalog.pending = pending;
        catalog
    }

    /// Waits until the servers `names` (left starting by a bounded wait) are running or
    /// failed.
    pub async fn settle(&self, names: &[String]) {
        for name in names {
            if let Ok(s) = self.server(name) {
                drop(s.state.lock().await);
            }
        }
    }

    /// Discovers `names` in background tasks, collecting what finishes within `budget`.
    pub(super) async fn discover_within(
        &self,
        names: &[String],
        budget: Duration,
    ) -> (Vec<SanitizedTool>, Vec<McpError>, Vec<String>) {
        let now = tokio::time::Instant::now();
        let deadline = now
            .checked_add(budget)
            .unwrap_or_else(|| now + Duration::from_secs(365 * 86_400));
        let mut tools = Vec::new();
        let mut failures = Vec::new();
        let mut pending = Vec::new();
        let mut running = Vec::new();
        let mut starting = Vec::new();
        for name in names {
            // Already being started (by an earlier bounded wait): not started twice, but
            // waited for within this budget like the rest.
            if let Ok(server) = self.server(name)
                && server.state.try_lock().is_err()
            {
                starting.push(server.clone());
                continue;
            }
            let inner = self.0.clone();
            let n = name.clone();
            // A team gateway's user who caused the discovery is carried into it: a
            // per-user server is discovered with that user's own token, and the audit
            // lines it writes (a start) name that user.
            let subject = crate::auth::bearer::SUBJECT
                .try_with(crate::auth::bearer::Subject::clone)
                .ok();
            let task = tokio::spawn(async move {
                let work = inner.tools_for(&n, false);
                match subject {
                    Some(s) => {
                        let user = s.sub.clone();
                        let work = crate::auth::bearer::SUBJECT.scope(s, work);
                        crate::trust::audit::ACTOR.scope(user, work).await
                    }
                    None => work.await,
                }
            });
            self.keep(task.abort_handle());
            running.push((name.clone(), task));
        }
        for (name, mut task) in running {
            match tokio::time::timeout_at(deadline, &mut task).await {
                Ok(Ok(Ok(t))) => tools.extend(t.iter().cloned()),
                Ok(Ok(Err(e))) => failures.push(e),
                Ok(Err(e)) => failures.push(McpError::Failed {
                    server: name,
                    reason: format!("its discovery stopped: {e}"),
                }),
                Err(_) => pending.push(name),
            }
        }
        for server in starting {
            let name = server.spec.name.clone();
            let Ok(state) = tokio::time::timeout_at(deadline, server.state.lock()).await else {
                pending.push(name);
                continue;
            };
            match &*state {
                State::Running(r) => tools.extend(offered(&server.spec, r.tools()).iter().cloned()),
                State::Failed(reason) => failures.push(McpError::Failed {
                    server: name,
                    reason: reason.clone(),
                }),
                // Its start ended without tools or a failure (a per-user sign-in it needs).
                State::Idle => pending.push(name),
            }
        }
        (tools, failures, pending)
    }
}

impl SessionInner {
    /// The names the prompt carries, from the cache where it has them; servers without
    /// a cache entry are discovered, concurrently, each under its own deadline.
    pub async fn tool_names(&self) -> (Vec<ToolName>, Vec<McpError>) {
        let (mut names, mut failures, missing) = match self.names_at_hand() {
            AtHand::Index(names) => return (names, Vec::new()),
            AtHand::Servers(names, failures, missing) => (names, failures, missing),
        };
        if missing.is_empty() {
            return (self.remember_index(names, &failures), failures);
        }
        let (found, more) = self.discover_many(&missing).await;
        names.extend(found.iter().map(SanitizedTool::names));
        failures.extend(more);
        (dedupe_names(names), failures)
    }

    /// Every server's names came from the cache: keep them as one index file, so the
    /// next start reads one file however many servers there are.
    pub(super) fn remember_index(
        &self,
        names: Vec<ToolName>,
        failures: &[McpError],
    ) -> Vec<ToolName> {
        let names = dedupe_names(names);
        if failures.is_empty()
            && let Some(key) = self.idle_index_key()
        {
            self.cache.write_index(&key, &names);
        }
        names
    }

    /// The whole configuration's index key, when no server has started (a running
    /// server's live list is newer than any index).
    pub(super) fn idle_index_key(&self) -> Option<String> {
        let all_idle = self
            .servers
            .iter()
            .all(|s| matches!(s.state.try_lock().as_deref(), Ok(State::Idle)));
        if all_idle { self.index_key() } else { None }
    }

    /// Whether `s` must be started for its tools (or is being started now): not running,
    /// not failed, nothing cached this session or on disk.
    pub(super) fn needs_start(&self, s: &Server) -> bool {
        let Ok(state) = s.state.try_lock() else {
            return true;
        };
        matches!(*state, State::Idle)
            && s.cached().is_none()
            && self
                .adapter_digest(s)
                .ok()
                .and_then(|d| self.cache.names(&s.spec, &d))
                .is_none()
    }

    /// The names at hand without starting anything: the whole index when it is warm,
    /// else each server's live or cached names; and the servers that have neither.
    pub(super) fn names_at_hand(&self) -> AtHand {
        if let Some(key) = self.idle_index_key()
            && let Some(names) = self.cache.read_index(&key)
        {
            return AtHand::Index(names);
        }
        let mut names = Vec::new();
        let mut failures = Vec::new();
        let mut missing = Vec::new();
        for s in &self.servers {
            if let Some(running) = s.state.try_lock().ok().and_then(|st| match &*st {
                State::Running(r) => Some(r.clone()),
                _ => None,
            }) {
                names.extend(
                    offered(&s.spec, running.tools())
                        .iter()
                        .map(SanitizedTool::names),
                );
                continue;
            }
            if let Some(State::Failed(reason)) = s.state.try_lock().ok().as_deref() {
                failures.push(McpError::Failed {
                    server: s.spec.name.clone(),
                    reason: reason.clone(),
                });
                continue;
            }
            match self
                .adapter_digest(s)
                .ok()
                .and_then(|d| self.cache.names(&s.spec, &d))
            {
                Some((list, _, _)) => {
                    names.extend(list.into_iter().filter(|n| s.spec.allows(&n.tool)))
                }
                None => missing.push(s.spec.name.clone()),
            }
        }
        AtHand::Servers(names, failures, missing)
    }

    /// Where the search index of this configuration's cached catalog is kept, and the
    /// key it is stored under (the configuration's, then `model`); `None` while any
    /// server runs, since a running server's live list is newer than any file.
    pub fn search_index(&self, model: &str) -> Option<(PathBuf, String)> {
        let key = format!("{}-{model}", self.idle_index_key()?);
        Some((self.cache.search_path(&key)?, key))
    }

    /// Identifies the whole configuration's cached names: every server's name, transport
    /// digest and adapter digest.
    pub(super) fn index_key(&self) -> Option<String> {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for s in &self.servers {
            h.update(s.spec.name.as_bytes());
            h.update([0]);
            h.update(s.spec.digest().as_bytes());
            h.update(self.adapter_digest(s).ok()?.as_bytes());
            h.update(
                s.spec
                    .enabled_tools
                    .as_ref()
                    .map(|t| t.join("\u{0}"))
                    .unwrap_or_default()
                    .as_bytes(),
            );
            h.update(s.spec.disabled_tools.join("\u{0}").as_bytes());
            // The policy's tool rules filter names too: a changed policy is another index.
            if s.spec.tool_policy != Default::default() {
                h.update(format!("{:?}", s.spec.tool_policy).as_bytes());
            }
            h.update([0xff]);
        }
        Some(crate::digest::hex(&h.finalize())[..32].to_owned())
    }

    /// Every available tool with its accepted schema: cached where possible, the rest
    /// discovered concurrently.
    pub async fn catalog(&self) -> Catalog {
        let names: Vec<String> = self.servers.iter().map(|s| s.spec.name.clone()).collect();
        let (tools, failures) = self.discover_many(&names).await;
        unique(tools, failures)
    }

    /// Servers' tools for a command that did not name them: one that failed within
    /// [`FAILURE_COOLDOWN`] is not started again.
    pub(super) async fn discover_many(
        &self,
        names: &[String],
    ) -> (Vec<SanitizedTool>, Vec<McpError>) {
        let futures = names.iter().map(|n| self.tools_for(n, false));
        let results = join_all(futures).await;
        let mut tools = Vec::new();
        let mut failures = Vec::new();
        for r in results {
            match r {
                Ok(t) => tools.extend(t.iter().cloned()),
                Err(e) => failures.push(e),
            }
        }
        (tools, failures)
    }

    /// One server's tools: from the running server, else the cache, else discovery. The
    /// caller names the server, so a recent failure does not stop it being tried.
    pub async fn tools(&self, name: &str) -> Result<Arc<Vec<SanitizedTool>>, McpError> {
        self.tools_for(name, true).await
    }

    pub(super) async fn tools_for(
        &self,
        name: &str,
        named: bool,
    ) -> Result<Arc<Vec<SanitizedTool>>, McpError> {
        let server = self.server(name)?;
        {
            let state = server.state.lock().await;
            match &*state {
                State::Running(r) => return Ok(offered(&server.spec, r.tools())),
                State::Failed(reason) => {
                    return Err(McpError::Failed {
                        server: name.to_owned(),
                        reason: reason.clone(),
                    });
                }
                State::Idle => {}
            }
        }
        if let Some(tools) = server.cached() {
            return Ok(offered(&server.spec, tools));
        }
        let digest = self.adapter_digest(server)?;
        if let Some(entry) = self.cache.read_shared(&server.spec, &digest).await {
            let tools = Arc::new(entry.tools);
            server.set_quarantined(entry.quarantined);
            server.set_cached(Some(tools.clone()));
            return Ok(offered(&server.spec, tools));
        }
        if !named && let Some(e) = self.cooling_down(server) {
            return Err(e);
        }
        self.start(server)
            .await
            .map(|r| offered(&server.spec, r.tools()))
    }

    /// Why `server` is left alone: it failed within [`FAILURE_COOLDOWN`].
    pub(super) fn cooling_down(&self, server: &Server) -> Option<McpError> {
        let f = self.cache.read_failure(&server.spec)?;
        let age = now().saturating_sub(f.at);
        let left = FAILURE_COOLDOWN.as_secs().checked_sub(age)?;
        let name = server.spec.name.clone();
        if f.needs_login {
            return Some(McpError::NeedsLogin {
                server: name,
                challenge: f.challenge,
            });
        }
        Some(McpError::Failed {
            reason: format!(
                "{}, {} ago; not started again for {} unless named",
                f.reason,
                crate::text::duration(age),
                crate::text::duration(left)
            ),
            server: name,
        })
    }
}
