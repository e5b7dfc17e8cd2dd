//! One loaded adapter component ([`Adapter`]): compiled or read from its precompiled
//! artifact, instantiated per call in a sandboxed store with a memory cap and a CPU-time
//! deadline, its idle instances pooled per server; and each call into it
//! (`Session`), whose every answer is re-checked before anything leaves the guard.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;
use wasmtime::Store;

use super::bindings::{AdapterPre, Instance, wit};
use super::sandbox::HostState;
use super::{
    AdapterSource, BUILTIN_DIGEST, BUILTIN_WASM, ContentBlock, Dropped, GUARD_BATCH_DEADLINE,
    GUARD_DEADLINE, GuardError, LoweredTool, MAX_NAME_INPUT_BYTES, MAX_RESULT_JSON_BYTES,
    MAX_TOOL_JSON_BYTES, Provider, SanitizedTool, Subject, ToolOutput, artifact, bindings, check,
    engine, findings, provider, read_component, sandbox,
};

use crate::sync::lock;

/// Idle instances kept for converting and scanning results: a few per server (for
/// concurrent calls), a bounded number in all, and never one that handled a large input
/// (its memory stays grown).
const MAX_IDLE_INSTANCES: usize = 16;
const MAX_IDLE_PER_SERVER: usize = 4;
pub(super) const MAX_POOLED_INPUT_BYTES: usize = 256 << 10;

/// A loaded adapter component, ready to instantiate.
pub struct Adapter {
    label: String,
    digest: String,
    pub(super) pre: AdapterPre,
    /// Healthy instances that converted or scanned a result, by server. An instance is
    /// only ever reused for the same server's results, so nothing one server sent can
    /// reach the output (or the findings) for another; any failure drops the instance.
    pub(super) idle: Mutex<HashMap<String, Vec<Live>>>,
    /// The most linear memory any instance of this adapter has held, in bytes.
    peak_memory: AtomicUsize,
}

type Live = (Store<HostState>, Instance);

impl fmt::Debug for Adapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Adapter")
            .field("label", &self.label)
            .field("digest", &self.digest)
            .finish()
    }
}

impl Adapter {
    pub(super) fn load(
        source: &AdapterSource,
        cache_dir: Option<&Path>,
    ) -> Result<Adapter, GuardError> {
        let label = source.to_string();
        let load_err = |reason: String| GuardError::Load {
            adapter: label.clone(),
            reason,
        };
        let bytes: std::borrow::Cow<'static, [u8]> = match source {
            AdapterSource::Builtin => BUILTIN_WASM.into(),
            AdapterSource::File(path) | AdapterSource::Pinned(path, _) => {
                read_component(path).map_err(load_err)?.into()
            }
        };
        let digest = match source {
            AdapterSource::Builtin => BUILTIN_DIGEST.to_owned(),
            AdapterSource::File(_) | AdapterSource::Pinned(..) => crate::digest::sha256_hex(&bytes),
        };
        if let AdapterSource::Pinned(_, expected) = source
            && !expected.eq_ignore_ascii_case(&digest)
        {
            return Err(load_err(format!(
                "its bytes changed since they were approved (sha256 {digest}, approved {expected}); review it again"
            )));
        }
        let engine = engine::engine().map_err(load_err)?;
        let component = artifact::load(engine, &bytes, &digest, cache_dir).map_err(load_err)?;
        let pre = engine::instantiate_pre(engine, &component).map_err(|reason| {
            GuardError::Incompatible {
                adapter: label.clone(),
                reason,
            }
        })?;
        Ok(Adapter {
            label,
            digest,
            pre,
            idle: Mutex::new(HashMap::new()),
            peak_memory: AtomicUsize::new(0),
        })
    }

    /// sha256 of the component, hex: cached guard outputs are keyed by it.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The contract version the component implements: `0.2`, or `0.1` for one that
    /// predates provider profiles.
    pub fn contract(&self) -> &'static str {
        if self.pre.lowers() { "0.2" } else { "0.1" }
    }

    /// Whether the adapter reports findings (exports `edgar:schema/scan`).
    pub fn scans(&self) -> bool {
        self.pre.scans()
    }

    /// The findings on each tool (JSON text, as the server sent it), in one sandboxed
    /// instance within [`GUARD_BATCH_DEADLINE`]; one result per tool. An adapter without
    /// `scan` finds nothing.
    pub fn scan_tools(
        &self,
        server: &str,
        tools: &[String],
    ) -> Vec<Result<Vec<findings::Finding>, GuardError>> {
        let mut session = self.session();
        session.batch_ends = Some(Instant::now() + GUARD_BATCH_DEADLINE);
        tools
            .iter()
            .map(|t| {
                if session.batch_spent() {
                    return Err(GuardError::Failed {
                        subject: Subject::new(server, None),
                        reason: format!(
                            "ran past its {} s limit for one tool list; not scanned",
                            GUARD_BATCH_DEADLINE.as_secs()
                        ),
                    });
                }
                session.scan_tool(server, t)
            })
            .collect()
    }

    /// The findings on each text block of `output` (what the model would read), by
    /// block index, in one sandboxed instance (one of `server`'s kept ones, as a result's
    /// conversion uses). An adapter without `scan` finds nothing.
    pub fn scan_output(
        &self,
        server: &str,
        tool: &str,
        output: &ToolOutput,
    ) -> Result<Vec<(usize, Vec<findings::Finding>)>, GuardError> {
        if !self.scans() {
            return Ok(Vec::new());
        }
        let size = output
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::Text { text } => text.len(),
                _ => 0,
            })
            .sum();
        self.pooled(server, size, |session| {
            Adapter::scan_blocks(session, server, tool, output)
        })
    }

    fn scan_blocks(
        session: &mut Session<'_>,
        server: &str,
        tool: &str,
        output: &ToolOutput,
    ) -> Result<Vec<(usize, Vec<findings::Finding>)>, GuardError> {
        let subject = Subject::new(server, Some(tool));
        let mut out = Vec::new();
        for (i, block) in output.content.iter().enumerate() {
            let ContentBlock::Text { text } = block else {
                continue;
            };
            let raw = session
                .call(&subject, |g, s| g.scan_text(s, text))?
                .unwrap_or_default();
            let found = findings::check(raw, findings::Scanned::Text(text)).map_err(|reason| {
                GuardError::BadOutput {
                    subject: subject.clone(),
                    reason,
                }
            })?;
            if !found.is_empty() {
                out.push((i, found));
            }
        }
        Ok(out)
    }

    /// The most linear memory any instance of this adapter has held so far, in bytes.
    pub fn peak_memory(&self) -> usize {
        self.peak_memory.load(Ordering::Relaxed)
    }

    /// The model-visible name of `tool` on `server`.
    pub fn tool_name(&self, server: &str, tool: &str) -> Result<String, GuardError> {
        self.session().tool_name(server, tool)
    }

    /// Accepts one tool object (JSON text) from `server`'s `tools/list`.
    pub fn to_schema(&self, server: &str, tool_json: &str) -> Result<SanitizedTool, GuardError> {
        self.session().accept(server, tool_json)
    }

    /// Accepts a whole `tools/list` reply's tools in one sandboxed instance (a fresh
    /// one after any failure), within [`GUARD_BATCH_DEADLINE`]. Two tools given the same
    /// name keep only the first. One result per tool, except that a batch that runs out
    /// of time ends with a single error standing for every tool not yet examined.
    pub fn accept_tools(
        &self,
        server: &str,
        tools: &[String],
    ) -> Vec<Result<SanitizedTool, GuardError>> {
        let mut session = self.session();
        session.batch_ends = Some(Instant::now() + GUARD_BATCH_DEADLINE);
        let mut names: HashMap<String, String> = HashMap::new();
        let mut out = Vec::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            if session.batch_spent() {
                out.push(Err(GuardError::Failed {
                    subject: Subject::new(server, None),
                    reason: format!(
                        "ran past its {} s limit for one tool list; {} of {} tools were not examined",
                        GUARD_BATCH_DEADLINE.as_secs(),
                        tools.len() - i,
                        tools.len()
                    ),
                }));
                break;
            }
            out.push(session.accept(server, t).and_then(|tool| {
                if let Some(first) = names.get(&tool.name) {
                    return Err(GuardError::BadOutput {
                        subject: Subject::new(server, Some(&tool.tool)),
                        reason: format!(
                            "its name {} is already taken by tool {}",
                            tool.name,
                            check::shown(first)
                        ),
                    });
                }
                names.insert(tool.name.clone(), tool.tool.clone());
                Ok(tool)
            }));
        }
        out
    }

    /// Converts one `CallToolResult` (JSON text) from `tool` on `server`.
    pub fn to_result(
        &self,
        server: &str,
        tool: &str,
        result_json: &str,
    ) -> Result<ToolOutput, GuardError> {
        self.pooled(server, result_json.len(), |session| {
            session.convert(server, tool, result_json)
        })
    }

    /// Runs `f` on one of `server`'s kept instances (a fresh one when none is idle),
    /// and keeps the instance for the server's next result unless it failed or took
    /// an input over [`MAX_POOLED_INPUT_BYTES`].
    fn pooled<R>(&self, server: &str, input: usize, f: impl FnOnce(&mut Session<'_>) -> R) -> R {
        let live = self
            .idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(server)
            .and_then(Vec::pop);
        let mut session = Session::new(self);
        session.live = live;
        let result = f(&mut session);
        if let Some(live) = session.live.take()
            && input <= MAX_POOLED_INPUT_BYTES
        {
            let mut idle = lock(&self.idle);
            let total: usize = idle.values().map(Vec::len).sum();
            let list = idle.entry(server.to_owned()).or_default();
            if total < MAX_IDLE_INSTANCES && list.len() < MAX_IDLE_PER_SERVER {
                list.push(live);
            }
        }
        result
    }

    /// Lowers each tool's input schema for `provider` in one sandboxed instance (a fresh
    /// one after any failure), within [`GUARD_BATCH_DEADLINE`], and checks every result
    /// against the provider's rules; one result per tool. An adapter of the previous
    /// contract gives the generic profile, said in the losses.
    pub fn lower_tools(
        &self,
        tools: &[&SanitizedTool],
        provider: Provider,
    ) -> Vec<Result<LoweredTool, GuardError>> {
        let mut session = self.session();
        session.batch_ends = Some(Instant::now() + GUARD_BATCH_DEADLINE);
        tools
            .iter()
            .map(|t| {
                if session.batch_spent() {
                    return Err(GuardError::Failed {
                        subject: Subject::new(&t.server, Some(&t.tool)),
                        reason: format!(
                            "ran past its {} s limit for one batch; not lowered",
                            GUARD_BATCH_DEADLINE.as_secs()
                        ),
                    });
                }
                session.lower(t, provider)
            })
            .collect()
    }

    pub(super) fn session(&self) -> Session<'_> {
        Session::new(self)
    }

    /// For benchmarks: `tool-name` and `to-schema` for each tool in one instance, with
    /// none of the host's checks, so the guest's cost can be compared with native code.
    /// Returns how many tools the adapter accepted.
    #[doc(hidden)]
    pub fn bench_raw_calls(
        &self,
        server: &str,
        tools: &[(String, String)],
    ) -> Result<usize, GuardError> {
        let mut session = self.session();
        let subject = Subject::default();
        let mut ok = 0;
        for (name, json) in tools {
            let n = session.call(&subject, |g, s| g.tool_name(s, server, name))?;
            let t = session.call(&subject, |g, s| g.to_schema(s, server, json))?;
            ok += usize::from(n.is_ok() && t.is_ok());
        }
        Ok(ok)
    }

    /// For benchmarks: `n` trivial `tool-name` calls in one fresh instance.
    #[doc(hidden)]
    pub fn bench_empty_calls(&self, n: usize) -> Result<(), GuardError> {
        let mut session = self.session();
        for _ in 0..n {
            session
                .call(&Subject::default(), |g, s| g.tool_name(s, "s", "t"))?
                .map_err(|r| rejected(&Subject::default(), r))?;
        }
        Ok(())
    }
}

/// One sandboxed instance used for one call or one batch. A failed call poisons the
/// instance, so the next call on the session instantiates a fresh one.
pub(super) struct Session<'a> {
    adapter: &'a Adapter,
    pub(super) live: Option<Live>,
    /// When a batch's time runs out; each call's deadline is cut to fit within it.
    pub(super) batch_ends: Option<Instant>,
    _ticking: engine::Ticking,
}

impl<'a> Session<'a> {
    pub(super) fn new(adapter: &'a Adapter) -> Session<'a> {
        Session {
            adapter,
            live: None,
            batch_ends: None,
            _ticking: engine::Ticking::start(),
        }
    }

    pub(super) fn batch_spent(&self) -> bool {
        self.batch_ends.is_some_and(|ends| Instant::now() >= ends)
    }

    /// The time the next call may run: the per-call deadline, or less when the batch
    /// has less left (then `true`).
    pub(super) fn limit(&self) -> (Duration, bool) {
        match self.batch_ends {
            Some(ends) => {
                let left = ends.saturating_duration_since(Instant::now());
                if left < GUARD_DEADLINE {
                    (left, true)
                } else {
                    (GUARD_DEADLINE, false)
                }
            }
            None => (GUARD_DEADLINE, false),
        }
    }

    /// Runs `f` on a live instance under the deadline, mapping any failure to a
    /// [`GuardError`] that names `subject`.
    pub(super) fn call<R>(
        &mut self,
        subject: &Subject,
        f: impl FnOnce(&Instance, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, GuardError> {
        let (limit, cut) = self.limit();
        let failure = |e: &wasmtime::Error| {
            if cut
                && matches!(
                    e.downcast_ref::<wasmtime::Trap>(),
                    Some(wasmtime::Trap::Interrupt)
                )
            {
                format!(
                    "ran past its {} s limit for one tool list",
                    GUARD_BATCH_DEADLINE.as_secs()
                )
            } else {
                engine::describe_failure(e)
            }
        };
        if self.live.is_none() {
            let mut store = sandbox::store(self.adapter.pre.engine());
            sandbox::start_clock(&mut store, limit);
            let instance =
                self.adapter
                    .pre
                    .instantiate(&mut store)
                    .map_err(|e| GuardError::Failed {
                        subject: subject.clone(),
                        reason: format!("cannot instantiate: {}", failure(&e)),
                    })?;
            self.live = Some((store, instance));
        }
        let Some((store, instance)) = self.live.as_mut() else {
            return Err(GuardError::Failed {
                subject: subject.clone(),
                reason: "no instance".into(),
            });
        };
        sandbox::start_clock(store, limit);
        let result = f(instance, store);
        self.adapter
            .peak_memory
            .fetch_max(store.data().memory_bytes(), Ordering::Relaxed);
        sandbox::log_guest_output(store, &self.adapter.label);
        result.map_err(|e| {
            self.live = None;
            GuardError::Failed {
                subject: subject.clone(),
                reason: failure(&e),
            }
        })
    }

    pub(super) fn tool_name(&mut self, server: &str, tool: &str) -> Result<String, GuardError> {
        let subject = Subject::new(server, Some(tool));
        for (what, s) in [("server name", server), ("tool name", tool)] {
            if s.len() > MAX_NAME_INPUT_BYTES {
                return Err(GuardError::TooLarge {
                    subject,
                    what,
                    size: s.len(),
                    limit: MAX_NAME_INPUT_BYTES,
                });
            }
        }
        let name = self
            .call(&subject, |g, s| g.tool_name(s, server, tool))?
            .map_err(|r| rejected(&subject, r))?;
        check::name(&name)
            .and_then(|()| check::prefixed(&name, server))
            .and_then(|()| check::bound(&name, server, tool))
            .map_err(|reason| GuardError::BadOutput { subject, reason })?;
        Ok(name)
    }

    pub(super) fn scan_tool(
        &mut self,
        server: &str,
        tool_json: &str,
    ) -> Result<Vec<findings::Finding>, GuardError> {
        let subject = tool_subject(server, tool_json)?;
        let raw = self
            .call(&subject, |g, s| g.scan_tool(s, server, tool_json))?
            .unwrap_or_default();
        if raw.is_empty() {
            return Ok(Vec::new());
        }
        let value: serde_json::Value =
            serde_json::from_str(tool_json).map_err(|e| GuardError::BadOutput {
                subject: subject.clone(),
                reason: format!("findings on a tool that is not JSON ({e})"),
            })?;
        findings::check(raw, findings::Scanned::Tool(&value))
            .map_err(|reason| GuardError::BadOutput { subject, reason })
    }

    pub(super) fn accept(
        &mut self,
        server: &str,
        tool_json: &str,
    ) -> Result<SanitizedTool, GuardError> {
        let subject = tool_subject(server, tool_json)?;
        let accepted = self
            .call(&subject, |g, s| g.to_schema(s, server, tool_json))?
            .map_err(|r| rejected(&subject, r))?;
        let subject = Subject::new(server, Some(&accepted.name));
        let checked = check::accepted(accepted).map_err(|reason| GuardError::BadOutput {
            subject: subject.clone(),
            reason,
        })?;
        // The call goes to the name the adapter returns: it must be the very name the
        // server gave this tool, or an adapter could route `list_issues` to
        // `delete_repository`.
        let listed = listed_name(tool_json);
        if listed.as_deref() != Some(checked.tool.as_str()) {
            return Err(GuardError::BadOutput {
                subject,
                reason: match listed {
                    Some(l) => format!(
                        "it renamed the server's tool {} to {}; calls must keep the server's own name",
                        check::shown(&l),
                        check::shown(&checked.tool)
                    ),
                    None => "the server's tool has no name, yet the adapter accepted it".into(),
                },
            });
        }
        let name = self.tool_name(server, &checked.tool)?;
        Ok(SanitizedTool {
            server: server.to_owned(),
            tool: checked.tool,
            name,
            description: checked.description,
            input_schema: checked.input_schema,
            output_schema: checked.output_schema,
            hints: checked.hints,
            dropped: checked.dropped,
        })
    }

    pub(super) fn lower(
        &mut self,
        tool: &SanitizedTool,
        provider: Provider,
    ) -> Result<LoweredTool, GuardError> {
        let subject = Subject::new(&tool.server, Some(&tool.tool));
        let (profile, input_schema, losses) = if provider == Provider::Generic {
            (provider, tool.input_schema.clone(), Vec::new())
        } else if !self.adapter.pre.lowers() {
            let note = Dropped {
                path: String::new(),
                reason: format!(
                    "the adapter predates provider profiles ({}); the schema is not lowered for {provider}",
                    bindings::PREVIOUS_EXPORT
                ),
            };
            (Provider::Generic, tool.input_schema.clone(), vec![note])
        } else {
            let text = tool.input_schema.to_string();
            let out = self
                .call(&subject, |g, s| g.lower_schema(s, provider.to_wit(), &text))?
                .map_err(|r| rejected(&subject, r))?;
            let (schema, losses) = check::lowered(out).map_err(|reason| GuardError::BadOutput {
                subject: subject.clone(),
                reason,
            })?;
            (provider, schema, losses)
        };
        let broken = provider::violations(profile, &tool.name, &input_schema);
        if !broken.is_empty() {
            return Err(GuardError::BadOutput {
                subject,
                reason: format!(
                    "the schema lowered for {profile} breaks its rules: {}",
                    check::shown_message(&broken.join("; "))
                ),
            });
        }
        Ok(LoweredTool {
            provider,
            profile,
            input_schema,
            losses,
        })
    }

    pub(super) fn convert(
        &mut self,
        server: &str,
        tool: &str,
        result_json: &str,
    ) -> Result<ToolOutput, GuardError> {
        let subject = Subject::new(server, Some(tool));
        if result_json.len() > MAX_RESULT_JSON_BYTES {
            return Err(GuardError::TooLarge {
                subject,
                what: "the result",
                size: result_json.len(),
                limit: MAX_RESULT_JSON_BYTES,
            });
        }
        let output = self
            .call(&subject, |g, s| g.to_result(s, result_json))?
            .map_err(|r| rejected(&subject, r))?;
        check::output(output).map_err(|reason| GuardError::BadOutput { subject, reason })
    }
}

/// The subject of a tool definition the guard is given, or why it is not given at all:
/// a definition over [`MAX_TOOL_JSON_BYTES`] never reaches the adapter.
fn tool_subject(server: &str, tool_json: &str) -> Result<Subject, GuardError> {
    let subject = Subject::new(server, None);
    if tool_json.len() > MAX_TOOL_JSON_BYTES {
        return Err(GuardError::TooLarge {
            subject,
            what: "the tool definition",
            size: tool_json.len(),
            limit: MAX_TOOL_JSON_BYTES,
        });
    }
    Ok(subject)
}

fn rejected(subject: &Subject, r: wit::Rejection) -> GuardError {
    let kind = match r.kind {
        wit::RejectionKind::InvalidJson => "invalid JSON",
        wit::RejectionKind::InvalidName => "invalid name",
        wit::RejectionKind::NotObjectSchema => "not an object schema",
        wit::RejectionKind::TooLarge => "too large",
        wit::RejectionKind::Other => "other",
    };
    GuardError::Rejected {
        subject: subject.clone(),
        kind,
        message: check::shown_message(&r.message),
    }
}

/// The `name` a server gave a tool, read from its JSON without building the rest (the
/// routing key the host checks the adapter's output against).
fn listed_name(tool_json: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Named<'a> {
        #[serde(borrow)]
        name: std::borrow::Cow<'a, str>,
    }
    serde_json::from_str::<Named>(tool_json)
        .ok()
        .map(|n| n.name.into_owned())
}
