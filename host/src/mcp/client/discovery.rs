//! Discovery: a server's start, its era, `tools/list` (every page, bounded), the guard
//! and the pins over what it said, and the cache entry written from it. A failure is
//! recorded so the cool-down can leave the server alone.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::json;
use tokio::sync::Mutex as AsyncMutex;

use crate::config::ServerSpec;
use crate::guard::findings::Finding;
use crate::guard::{Adapter, GuardError, SanitizedTool};
use crate::mcp::McpError;
use crate::mcp::cache::{Entry, Failure, Timings, now};
use crate::mcp::connection::Connection;
use crate::mcp::news::{Change, News};
use crate::mcp::task::Tasks;
use crate::text::shown;
use crate::trust::audit::AuditLog;
use crate::trust::pins::{PinStore, Quarantined};

use super::hints::{confined_hint, strip_server, with_tail, workdir_hint};
use super::{
    MAX_PAGES, MAX_TOOLS_BYTES_PER_SERVER, MAX_TOOLS_PER_SERVER, Running, Server, SessionInner,
    State,
};

/// Longest a server's `ttlMs` keeps its cached list fresh.
pub(super) const MAX_FRESH_MS: u64 = 86_400_000;

/// One `tools/list` result, its parts undecoded.
#[derive(serde::Deserialize)]
pub(super) struct Page<'a> {
    #[serde(borrow)]
    tools: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, rename = "nextCursor")]
    next_cursor: Option<&'a serde_json::value::RawValue>,
    #[serde(rename = "ttlMs", default)]
    ttl_ms: Option<f64>,
}

/// Milliseconds since the epoch.
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Until when a stateless server's list stays fresh: its `ttlMs` from now (capped at a
/// day); `None` for a handshake server, or a TTL of 0 (stale at once).
pub(super) fn fresh_until(modern: bool, ttl_ms: u64) -> Option<u64> {
    (modern && ttl_ms > 0).then(|| now_ms().saturating_add(ttl_ms.min(MAX_FRESH_MS)))
}

/// `tools/list`, following `nextCursor` up to [`MAX_PAGES`]; each tool as JSON text, and
/// the shortest `ttlMs` of its pages (0 where a page has none, as the spec says).
pub(super) async fn list_tools(
    server: &str,
    conn: &Connection,
    timeout: Duration,
) -> Result<(Vec<String>, u64), McpError> {
    let bad = |reason: String| McpError::Protocol {
        server: server.to_owned(),
        reason,
    };
    let mut raw = Vec::new();
    let mut bytes = 0;
    let mut cursor: Option<String> = None;
    let mut seen = HashSet::new();
    let mut ttl_ms = u64::MAX;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .as_ref()
            .map_or(json!({}), |c| json!({ "cursor": c }));
        // Each tool stays the text the server sent (the guard reads text), and the
        // count and bytes are checked before anything is kept.
        let result = conn.request_raw("tools/list", params, timeout).await?;
        let page: Page<'_> = serde_json::from_str(result.get())
            .map_err(|e| bad(format!("its tools/list result does not decode ({e})")))?;
        let Some(tools) = page.tools else {
            return Err(bad("its tools/list result has no tools list".into()));
        };
        let page_ttl = page
            .ttl_ms
            .filter(|t| t.is_finite() && *t > 0.0)
            .map_or(0, |t| t as u64);
        ttl_ms = ttl_ms.min(page_ttl);
        let room = MAX_TOOLS_PER_SERVER - raw.len();
        let tools = crate::mcp::protocol::elements(tools.get(), room).map_err(|e| {
            bad(if e.starts_with("holds more than") {
                format!("it lists more than {MAX_TOOLS_PER_SERVER} tools")
            } else {
                format!("its tools list {e}")
            })
        })?;
        for t in tools {
            bytes += t.get().len();
            if bytes > MAX_TOOLS_BYTES_PER_SERVER {
                return Err(bad(format!(
                    "its tools/list pages hold more than {} MiB of tool definitions",
                    MAX_TOOLS_BYTES_PER_SERVER >> 20
                )));
            }
            raw.push(t.get().to_owned());
        }
        match page
            .next_cursor
            .and_then(|c| serde_json::from_str::<String>(c.get()).ok())
        {
            Some(c) if !c.is_empty() => {
                if !seen.insert(c.clone()) {
                    return Err(bad("its tools/list pagination repeats a cursor".into()));
                }
                cursor = Some(c);
            }
            _ => return Ok((raw, ttl_ms)),
        }
    }
    Err(bad(format!(
        "its tools/list goes on for more than {MAX_PAGES} pages"
    )))
}

/// Checks guarded tools against the server's pins: the accepted ones, and those held
/// back. First pins and new quarantines are recorded in the audit trail. A pin store
/// that cannot be used fails discovery: never offer unchecked tools when pinning is on.
pub(super) fn pin_tools(
    pins: Option<&PinStore>,
    audit: Option<&AuditLog>,
    spec: &ServerSpec,
    tools: Vec<SanitizedTool>,
    flagged: &BTreeMap<String, String>,
) -> Result<(Vec<SanitizedTool>, Vec<Quarantined>), McpError> {
    let Some(pins) = pins else {
        return Ok(super::findings::hold_back(tools, flagged));
    };
    let checked = pins
        .check_with_findings(spec, tools, now(), flagged)
        .map_err(|e| McpError::Start {
            server: spec.name.clone(),
            reason: format!("its tool pins cannot be checked: {e}"),
        })?;
    if !checked.pinned_by_lock.is_empty() {
        tracing::warn!(
            server = spec.name,
            "first use: {} tool(s) pinned because the project's .mcp.lock lists them as they are; `edgar mcp pins {}` shows them",
            checked.pinned_by_lock.len(),
            spec.name
        );
    }
    if let Some(audit) = audit {
        if checked.first {
            audit.note(
                "pinned",
                json!({"server": spec.name, "tools": checked.accepted.len(), "launch": spec.digest(),
                       "by_lock": checked.pinned_by_lock}),
            );
        }
        for q in &checked.newly_quarantined {
            audit.note(
                "quarantine",
                json!({"server": spec.name, "tool": q.tool, "change": q.change}),
            );
        }
    }
    warn_quarantined(&spec.name, &checked.newly_quarantined);
    Ok((checked.accepted, checked.quarantined))
}

/// Says which tools were newly quarantined: a line each for a few, one line for many (a
/// changed adapter or a server's new release changes every tool at once).
fn warn_quarantined(server: &str, newly: &[Quarantined]) {
    const EACH_UP_TO: usize = 3;
    const NAMED_UP_TO: usize = 8;
    if newly.len() <= EACH_UP_TO {
        for q in newly {
            tracing::warn!(
                "tool {} of {server} quarantined: {}; review it with `edgar mcp approve {server}`",
                shown(&q.tool),
                q.change,
            );
        }
        return;
    }
    let mut changes: Vec<&str> = newly.iter().map(|q| q.change.as_str()).collect();
    changes.sort_unstable();
    changes.dedup();
    let mut names: Vec<String> = newly
        .iter()
        .take(NAMED_UP_TO)
        .map(|q| shown(&q.tool))
        .collect();
    if newly.len() > NAMED_UP_TO {
        names.push(format!("and {} more", newly.len() - NAMED_UP_TO));
    }
    tracing::warn!(
        "{} tools of {server} quarantined ({}): {}; review them with `edgar mcp approve {server}`",
        newly.len(),
        changes.join("; "),
        names.join(", "),
    );
}

/// What the guard made of a server's tools: those accepted, each with its scan when the
/// adapter reports findings, and those refused (with why).
pub(super) type Screened = (
    Vec<(SanitizedTool, Option<Result<Vec<Finding>, GuardError>>)>,
    Vec<String>,
);

/// Runs the tools through the guard and, when the adapter reports findings, its scan, off
/// the async runtime. A refused tool is logged and listed, never fatal.
pub(super) async fn screen_tools(
    adapter: &Arc<Adapter>,
    spec: &ServerSpec,
    raw: Vec<String>,
) -> Result<Screened, McpError> {
    let adapter = adapter.clone();
    let server = spec.name.clone();
    let (results, scans) = tokio::task::spawn_blocking(move || {
        let results = adapter.accept_tools(&server, &raw);
        let scans = adapter
            .scans()
            .then(|| adapter.scan_tools(&server, &raw[..results.len().min(raw.len())]));
        (results, scans)
    })
    .await
    .map_err(|e| McpError::Start {
        server: spec.name.clone(),
        reason: format!("the guard task failed: {e}"),
    })?;
    let mut tools = Vec::new();
    let mut refused = Vec::new();
    let mut scans = scans.map(Vec::into_iter);
    for r in results {
        let scan = scans.as_mut().and_then(Iterator::next);
        match r {
            Ok(t) => tools.push((t, scan)),
            Err(e) => {
                tracing::warn!(server = spec.name, "tool refused: {e}");
                refused.push(e.to_string());
            }
        }
    }
    Ok((tools, refused))
}

/// [`screen_tools`], then the findings judged (see `findings::judge`): the tools
/// accepted, those refused, and those whose findings hold them back.
pub(super) async fn guard_tools(
    adapter: &Arc<Adapter>,
    spec: &ServerSpec,
    raw: Vec<String>,
    audit: Option<&AuditLog>,
) -> Result<(Vec<SanitizedTool>, Vec<String>, BTreeMap<String, String>), McpError> {
    let (screened, refused) = screen_tools(adapter, spec, raw).await?;
    let mut tools = Vec::with_capacity(screened.len());
    let mut scanned = Vec::new();
    for (t, scan) in screened {
        if let Some(scan) = scan {
            scanned.push((t.tool().to_owned(), scan));
        }
        tools.push(t);
    }
    let flagged = super::findings::judge(spec, scanned, audit);
    Ok((tools, refused, flagged))
}

impl SessionInner {
    /// The running server, starting (discovering) it if needed. A failure marks the
    /// server failed for the session.
    pub(super) async fn start(&self, server: &Server) -> Result<Arc<Running>, McpError> {
        let name = &server.spec.name;
        let mut state = server.state.lock().await;
        match &*state {
            State::Running(r) => match r.conn.closed_reason() {
                None => return Ok(r.clone()),
                Some(reason) => {
                    let reason = format!("the server stopped: {reason}");
                    *state = State::Failed(reason.clone());
                    self.cache.write_failure(
                        &server.spec,
                        &Failure {
                            reason: reason.clone(),
                            at: now(),
                            needs_login: false,
                            challenge: None,
                        },
                    );
                    return Err(McpError::Failed {
                        server: name.clone(),
                        reason,
                    });
                }
            },
            State::Failed(reason) => {
                return Err(McpError::Failed {
                    server: name.clone(),
                    reason: reason.clone(),
                });
            }
            State::Idle => {}
        }
        match self.discover(server).await {
            Ok(running) => {
                self.cache.clear_failure(&server.spec);
                server.generation.fetch_add(1, Ordering::SeqCst);
                self.watch_list_changed(server, &running);
                if running.conn.modern_version().is_some() {
                    self.listen_for_changes(&server.spec.name, &running);
                }
                *state = State::Running(running.clone());
                let _ = self.news.send(News {
                    server: name.as_str().into(),
                    change: Change::Started,
                });
                Ok(running)
            }
            // A team gateway user without a token of their own for a server signed in
            // to per user: theirs to mend, not the server's failure (another user's
            // discovery, or theirs after signing in, may start it).
            Err(e @ McpError::NeedsLogin { .. }) if server.spec.oauth.grant.per_user() => {
                tracing::debug!(server = name, "discovery needs the user's sign-in");
                Err(e)
            }
            Err(e) => {
                let reason = strip_server(&e, name);
                // The caller reports the error; a warning too would say it twice.
                tracing::debug!(server = name, "discovery failed: {reason}");
                let (needs_login, challenge) = match &e {
                    McpError::NeedsLogin { challenge, .. } => (true, challenge.clone()),
                    _ => (false, None),
                };
                self.cache.write_failure(
                    &server.spec,
                    &Failure {
                        reason: reason.clone(),
                        at: now(),
                        needs_login,
                        challenge,
                    },
                );
                if !needs_login {
                    self.cache.clear_era(&server.spec);
                }
                *state = State::Failed(reason);
                // A bounded wait may have reported it pending: the catalog changed.
                server.generation.fetch_add(1, Ordering::SeqCst);
                Err(e)
            }
        }
    }

    /// Connect, `initialize`, check the version, `tools/list` (all pages), guard, cache.
    pub(super) async fn discover(&self, server: &Server) -> Result<Arc<Running>, McpError> {
        let spec = &server.spec;
        let name = &spec.name;
        let digest = self.adapter_digest(server)?;
        let started = std::time::Instant::now();
        let ms = |since: std::time::Instant| since.elapsed().as_millis() as u64;
        let mut timings = Timings {
            at: now(),
            ..Timings::default()
        };
        let (mut transport, conn) = self.connect(spec)?;
        timings.spawn_ms = ms(started);
        let handshake = async {
            let phase = std::time::Instant::now();
            // The guard's first load (engine, compile) overlaps the server's own start.
            let (adapter, era) = tokio::join!(self.adapter(server), self.negotiate(spec, &conn));
            let (adapter, era) = (adapter?, era?);
            timings.initialize_ms = Some(ms(phase));
            // A stateless server's list that it said is still fresh (`ttlMs`) is used as
            // cached: no `tools/list`, no guard work, nothing written.
            let modern = conn.modern_version().is_some();
            if modern
                && let Some(entry) = self.cache.read(spec, &digest)
                && entry.fresh_until_ms.is_some_and(|t| t > now_ms())
            {
                tracing::debug!(server = name, "its tool list is still fresh");
                return Ok::<_, McpError>((era, entry, true));
            }
            let phase = std::time::Instant::now();
            let (raw, ttl_ms) = list_tools(name, &conn, spec.startup_timeout).await?;
            timings.list_ms = Some(ms(phase));
            let phase = std::time::Instant::now();
            let (tools, refused, flagged) =
                guard_tools(&adapter, spec, raw, self.opts.audit.as_ref()).await?;
            let (tools, quarantined) = pin_tools(
                self.opts.pins.as_deref(),
                self.opts.audit.as_ref(),
                spec,
                tools,
                &flagged,
            )?;
            timings.guard_ms = Some(ms(phase));
            let entry = Entry {
                tools,
                refused,
                quarantined,
                protocol_version: era.version.clone(),
                server_info: era.server_info.clone(),
                fetched_at: now(),
                fresh_until_ms: fresh_until(modern, ttl_ms),
            };
            Ok::<_, McpError>((era, entry, false))
        };
        let outcome = tokio::time::timeout(spec.startup_timeout, handshake).await;
        timings.total_ms = ms(started);
        timings.ok = matches!(outcome, Ok(Ok(_)));
        self.cache.write_timings(spec, &timings);
        let outcome = match outcome {
            Ok(r) => r,
            Err(_) => Err(McpError::Timeout {
                server: name.clone(),
                method: "initialize and tools/list".into(),
                timeout: spec.startup_timeout,
            }),
        };
        let (_, entry, cached) = match outcome {
            Ok(v) => v,
            Err(e) => {
                let tail = transport.stderr_tail();
                transport.close().await;
                let e = confined_hint(with_tail(e, &tail), spec);
                return Err(workdir_hint(e, spec, &self.opts.cwd));
            }
        };
        server.set_quarantined(entry.quarantined.clone());
        if !cached && let Err(e) = self.cache.write(spec, &digest, &entry) {
            tracing::debug!(server = name, "cannot write the discovery cache: {e}");
        }
        Ok(Arc::new(Running {
            conn,
            transport: AsyncMutex::new(transport),
            tools: RwLock::new(Arc::new(entry.tools)),
            called: std::sync::atomic::AtomicBool::new(false),
            tasks: Tasks::default(),
            prompts: std::sync::Mutex::new(None),
            watched: std::sync::Mutex::default(),
        }))
    }
}
