//! The host side of the border guard: runs a schema-adapter component (the
//! `edgar:schema/adapter` world in `wit/`) in a sandbox and re-checks everything it
//! returns. This module is the only constructor of a [`SanitizedTool`] and of the
//! [`ToolOutput`] the harness shows a model.
//!
//! Nothing here runs at startup: the wasmtime `Engine` is created by the first
//! [`Guard::adapter`] call, and the component is loaded from a precompiled artifact
//! cached on disk when one exists.

mod adapter;
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
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::sync::lock;

pub use adapter::Adapter;
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

#[cfg(test)]
mod tests;
