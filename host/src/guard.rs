//! The host side of the border guard: runs a schema-adapter component (the
//! `edgar:schema/adapter` world in `wit/`) in a sandbox and re-checks everything it
//! returns. This module is the only constructor of a [`SanitizedTool`] and of the
//! [`ToolOutput`] the harness shows a model.
//!
//! Nothing here runs at startup: the wasmtime `Engine` is created by the first
//! [`Guard::adapter`] call, and the component is loaded from a precompiled artifact
//! cached on disk when one exists.

mod artifact;
mod bindings;
pub(crate) mod check;
pub mod context;
mod cpu_clock;
mod engine;
pub mod findings;
pub mod kit;
pub mod limits;
pub mod provider;
mod sandbox;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use wasmtime::Store;

use crate::sync::lock;
use bindings::{AdapterPre, Instance, wit};
use sandbox::HostState;

pub use check::BUILTIN_TOOLS;
pub use provider::Provider;

/// Compiles an accepted input schema into a validator (JSON Schema 2020-12, no remote
/// references). Costs milliseconds: callers compile a tool's schema on its first call.
pub fn compile_schema(schema: &serde_json::Value) -> Result<jsonschema::Validator, String> {
    check::compile(schema)
}

/// Most memory one adapter instance may use; the reference adapter needs about three
/// times the size of the JSON it parses.
pub const GUARD_MEMORY_BYTES: usize = 64 << 20;
/// Most CPU time one adapter call may use before it is interrupted (a starved call is
/// cut at four times this on the wall clock; see `cpu_clock`).
pub const GUARD_DEADLINE: Duration = Duration::from_secs(1);
/// Longest one server's whole `tools/list` may keep an adapter busy: the per-call
/// deadline alone would let 10,000 slow tools hold a thread for hours. The reference
/// adapter needs about 40 ms for a thousand tools.
pub const GUARD_BATCH_DEADLINE: Duration = Duration::from_secs(10);
/// Largest third-party adapter component accepted.
pub const MAX_ADAPTER_BYTES: u64 = 32 << 20;
/// Largest server or tool name handed to an adapter.
pub const MAX_NAME_INPUT_BYTES: usize = 4096;
/// Largest tool definition handed to an adapter.
pub const MAX_TOOL_JSON_BYTES: usize = 1 << 20;
/// Largest `CallToolResult` handed to an adapter.
pub const MAX_RESULT_JSON_BYTES: usize = 8 << 20;

/// The reference adapter, built from `guest-schema/` by `build.rs`.
static BUILTIN_WASM: &[u8] = include_bytes!(env!("EDGAR_GUEST_WASM"));

/// Whether a harness may use `name` for a tool of its own (a built-in such as
/// `tool_search`): `[A-Za-z0-9_-]`, 1 to 64 characters, and no `__`. Every server tool's
/// visible name holds `__` (the host checks it), so no adapter output can take a
/// built-in's name, whatever built-ins the harness registers.
pub fn may_be_builtin(name: &str) -> bool {
    !name.contains("__")
        && !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// The built-in adapter component's bytes: a starting point (and a baseline) for adapter
/// authors, who can save it and load it as a file.
pub fn builtin_component() -> &'static [u8] {
    BUILTIN_WASM
}

/// An error from the guard, naming what was being guarded.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// The adapter component could not be read or compiled.
    #[error("schema adapter {adapter}: {reason}")]
    Load { adapter: String, reason: String },
    /// The component implements neither `edgar:schema/adapter@0.2` nor the previous `@0.1`.
    #[error("schema adapter {adapter} is not compatible with edgar:schema/adapter@0.2.x: {reason}")]
    Incompatible { adapter: String, reason: String },
    /// The input was over a host limit and never reached the adapter.
    #[error("{subject}: {what} of {size} bytes is over the {limit}-byte limit")]
    TooLarge {
        subject: Subject,
        what: &'static str,
        size: usize,
        limit: usize,
    },
    /// The adapter refused the input.
    #[error("{subject}: refused by the schema adapter ({kind}): {message}")]
    Rejected {
        subject: Subject,
        kind: &'static str,
        message: String,
    },
    /// The adapter trapped, ran out of time or memory; the next call gets a fresh instance.
    #[error("{subject}: the schema adapter failed: {reason}")]
    Failed { subject: Subject, reason: String },
    /// The adapter returned something the host does not accept.
    #[error("{subject}: the schema adapter's output was refused: {reason}")]
    BadOutput { subject: Subject, reason: String },
}

/// What a guard call was about: a server, a tool, or both. Displayed escaped and short,
/// because both names come from outside.
#[derive(Debug, Clone, Default)]
pub struct Subject {
    pub server: Option<String>,
    pub tool: Option<String>,
    /// What `tool` names when it is not a tool: `prompt`, `resource`, ...
    pub kind: Option<&'static str>,
}

impl Subject {
    fn new(server: &str, tool: Option<&str>) -> Subject {
        Subject {
            server: Some(server.to_owned()),
            tool: tool.map(str::to_owned),
            kind: None,
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.server, &self.tool) {
            (Some(s), Some(t)) => write!(
                f,
                "server {}, {} {}",
                check::shown(s),
                self.kind.unwrap_or("tool"),
                check::shown(t)
            ),
            (Some(s), None) => write!(f, "server {}", check::shown(s)),
            (None, Some(t)) => write!(f, "tool {}", check::shown(t)),
            (None, None) => f.write_str("tool result"),
        }
    }
}

/// Which adapter component to run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AdapterSource {
    /// The reference adapter compiled into this binary.
    Builtin,
    /// A third-party component file.
    File(PathBuf),
    /// A third-party component file whose bytes must have exactly this sha256 (hex): an
    /// approved project entry's adapter, or one the policy's `allowed_adapters` admitted.
    /// The file is read once per load and compared, so a file swapped after the approval
    /// or the policy check is refused, never run.
    Pinned(PathBuf, String),
}

impl fmt::Display for AdapterSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdapterSource::Builtin => f.write_str("(built-in)"),
            AdapterSource::File(p) | AdapterSource::Pinned(p, _) => write!(f, "{}", p.display()),
        }
    }
}

/// Tool annotations as untrusted hints: never permissions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hints {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

/// One thing the adapter removed or changed in a tool, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    pub path: String,
    pub reason: String,
}

/// A tool that passed the guard. Only this module constructs one, so holding one means
/// the name, schema and description were checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SanitizedTool {
    server: String,
    tool: String,
    name: String,
    description: String,
    input_schema: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_schema: Option<serde_json::Value>,
    hints: Hints,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    dropped: Vec<Dropped>,
}

/// A tool's names, for the prompt and the search: what the model calls, the configured
/// server and the server's own name. Kept apart from [`SanitizedTool`] so the prompt's
/// names can be cached and ranked without schemas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ToolName {
    pub name: String,
    pub server: String,
    pub tool: String,
}

impl SanitizedTool {
    /// Its names, without the schema or description.
    pub fn names(&self) -> ToolName {
        ToolName {
            name: self.name.clone(),
            server: self.server.clone(),
            tool: self.tool.clone(),
        }
    }
    /// The configured server name.
    pub fn server(&self) -> &str {
        &self.server
    }
    /// The server's own name for the tool, used in `tools/call`.
    pub fn tool(&self) -> &str {
        &self.tool
    }
    /// The name the model sees and calls.
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn description(&self) -> &str {
        &self.description
    }
    /// The accepted input schema: an object schema in the subset the host validates.
    pub fn input_schema(&self) -> &serde_json::Value {
        &self.input_schema
    }
    pub fn output_schema(&self) -> Option<&serde_json::Value> {
        self.output_schema.as_ref()
    }
    pub fn hints(&self) -> &Hints {
        &self.hints
    }
    /// What the adapter removed or changed, with reasons.
    pub fn dropped(&self) -> &[Dropped] {
        &self.dropped
    }

    /// Re-admits a tool read back from edgar's own cache, re-running the cheap checks
    /// (the schema's full compile happens on the tool's first call).
    pub fn from_cache(cached: CachedTool) -> Result<SanitizedTool, String> {
        check::name(&cached.name)?;
        check::prefixed(&cached.name, &cached.server)?;
        check::bound(&cached.name, &cached.server, &cached.tool)?;
        check::schema_shape(&cached.input_schema)?;
        Ok(SanitizedTool {
            server: cached.server,
            tool: cached.tool,
            name: cached.name,
            description: cached.description,
            input_schema: cached.input_schema,
            output_schema: cached.output_schema,
            hints: cached.hints,
            dropped: cached.dropped,
        })
    }
}

/// The serialized form of a [`SanitizedTool`] in edgar's cache; turned back into one
/// only through [`SanitizedTool::from_cache`].
#[derive(Debug, Clone, Deserialize)]
pub struct CachedTool {
    pub server: String,
    pub tool: String,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub input_schema: serde_json::Value,
    #[serde(default)]
    pub output_schema: Option<serde_json::Value>,
    #[serde(default)]
    pub hints: Hints,
    #[serde(default)]
    pub dropped: Vec<Dropped>,
}

/// A tool's input schema lowered for one provider, with what was lost. Only this module
/// constructs one, so holding one means the schema meets its profile's rules.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoweredTool {
    provider: Provider,
    profile: Provider,
    input_schema: serde_json::Value,
    losses: Vec<Dropped>,
}

impl LoweredTool {
    /// The provider asked for.
    pub fn provider(&self) -> Provider {
        self.provider
    }
    /// The rules the schema meets: the provider asked for, or `generic` from an adapter
    /// that predates provider profiles.
    pub fn profile(&self) -> Provider {
        self.profile
    }
    pub fn input_schema(&self) -> &serde_json::Value {
        &self.input_schema
    }
    /// Every constraint dropped or weakened, with its path into the accepted schema.
    pub fn losses(&self) -> &[Dropped] {
        &self.losses
    }
}

/// A converted tool result: the harness's ordinary content blocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolOutput {
    #[serde(rename = "isError")]
    pub is_error: bool,
    pub content: Vec<ContentBlock>,
}

/// One content block, serialized in MCP's own shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    Image {
        #[serde(rename = "mimeType")]
        mime_type: String,
        data: String,
    },
    Audio {
        #[serde(rename = "mimeType")]
        mime_type: String,
        data: String,
    },
    ResourceLink {
        uri: String,
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
    /// An embedded resource: `{"type": "resource", "resource": {...}}`, as MCP nests it.
    Resource {
        resource: ResourceContents,
    },
}

/// An embedded resource's contents: text or base64 bytes, with its URI and type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceContents {
    pub uri: String,
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// The session's guard: loads adapters on first use and keeps them, one per source.
#[derive(Debug)]
pub struct Guard {
    cache_dir: Option<PathBuf>,
    adapters: Mutex<HashMap<AdapterSource, Arc<Adapter>>>,
}

impl Guard {
    /// A guard that caches precompiled adapters under `cache_dir` (usually
    /// [`crate::paths::cache_dir`]). Creates nothing yet.
    pub fn new(cache_dir: Option<PathBuf>) -> Guard {
        Guard {
            cache_dir,
            adapters: Mutex::new(HashMap::new()),
        }
    }

    /// The adapter for `source` if it is already loaded: never blocks.
    pub fn loaded(&self, source: &AdapterSource) -> Option<Arc<Adapter>> {
        lock(&self.adapters).get(source).cloned()
    }

    /// The adapter for `source`, loaded (and the engine created) on first use.
    pub fn adapter(&self, source: &AdapterSource) -> Result<Arc<Adapter>, GuardError> {
        let mut adapters = lock(&self.adapters);
        if let Some(a) = adapters.get(source) {
            return Ok(a.clone());
        }
        let adapter = Arc::new(Adapter::load(source, self.cache_dir.as_deref())?);
        adapters.insert(source.clone(), adapter.clone());
        Ok(adapter)
    }
}

/// Idle instances kept for converting and scanning results: a few per server (for
/// concurrent calls), a bounded number in all, and never one that handled a large input
/// (its memory stays grown).
const MAX_IDLE_INSTANCES: usize = 16;
const MAX_IDLE_PER_SERVER: usize = 4;
const MAX_POOLED_INPUT_BYTES: usize = 256 << 10;

/// A loaded adapter component, ready to instantiate.
pub struct Adapter {
    label: String,
    digest: String,
    pre: AdapterPre,
    /// Healthy instances that converted or scanned a result, by server. An instance is
    /// only ever reused for the same server's results, so nothing one server sent can
    /// reach the output (or the findings) for another; any failure drops the instance.
    idle: Mutex<HashMap<String, Vec<Live>>>,
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

/// sha256 of the built-in adapter component, hex (computed at build time).
pub const BUILTIN_DIGEST: &str = env!("EDGAR_GUEST_DIGEST");

impl AdapterSource {
    /// sha256 of the component, hex, without loading it: cached guard outputs are keyed
    /// by it, so swapping adapters never serves stale sanitized schemas.
    pub fn digest(&self) -> Result<String, GuardError> {
        match self {
            AdapterSource::Builtin => Ok(BUILTIN_DIGEST.to_owned()),
            AdapterSource::Pinned(_, sha256) => Ok(sha256.clone()),
            AdapterSource::File(path) => read_component(path)
                .map(|bytes| crate::digest::sha256_hex(&bytes))
                .map_err(|reason| GuardError::Load {
                    adapter: self.to_string(),
                    reason,
                }),
        }
    }
}

impl Adapter {
    fn load(source: &AdapterSource, cache_dir: Option<&Path>) -> Result<Adapter, GuardError> {
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

    fn session(&self) -> Session<'_> {
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
struct Session<'a> {
    adapter: &'a Adapter,
    live: Option<Live>,
    /// When a batch's time runs out; each call's deadline is cut to fit within it.
    batch_ends: Option<Instant>,
    _ticking: engine::Ticking,
}

impl<'a> Session<'a> {
    fn new(adapter: &'a Adapter) -> Session<'a> {
        Session {
            adapter,
            live: None,
            batch_ends: None,
            _ticking: engine::Ticking::start(),
        }
    }

    fn batch_spent(&self) -> bool {
        self.batch_ends.is_some_and(|ends| Instant::now() >= ends)
    }

    /// The time the next call may run: the per-call deadline, or less when the batch
    /// has less left (then `true`).
    fn limit(&self) -> (Duration, bool) {
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
    fn call<R>(
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

    fn tool_name(&mut self, server: &str, tool: &str) -> Result<String, GuardError> {
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

    fn scan_tool(
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

    fn accept(&mut self, server: &str, tool_json: &str) -> Result<SanitizedTool, GuardError> {
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

    fn lower(
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

    fn convert(
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

/// An adapter file's bytes: a regular file (a project could name `/dev/zero` or a FIFO),
/// read up to [`MAX_ADAPTER_BYTES`] whatever its size claims.
pub(crate) fn read_component(path: &Path) -> Result<Vec<u8>, String> {
    // Opened once, without following a final symbolic link and without blocking on a
    // FIFO or device, then checked on the descriptor: what is checked is what is read.
    let bytes = crate::paths::read_regular(path, MAX_ADAPTER_BYTES)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .ok_or_else(|| format!("cannot read {}: it does not exist", path.display()))?;
    if wasmtime::Engine::detect_precompiled(&bytes).is_some() {
        return Err("a precompiled artifact; give the .wasm component instead".into());
    }
    Ok(bytes)
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

#[cfg(test)]
mod tests;
